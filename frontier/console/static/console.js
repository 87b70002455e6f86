// Polls /api/snapshot every second with the token the server put in the page (loopback only).
"use strict";
const token = (document.querySelector('meta[name="frontier-token"]') || {}).content || "";
async function poll() {
  try {
    const response = await fetch("/api/snapshot", {headers: {Authorization: "Bearer " + token}});
    const crawl = (await response.json()).crawl;
    for (const key of ["fetched", "queued", "in_flight", "pages_per_s"]) {
      document.getElementById(key).textContent = crawl[key];
    }
  } catch (error) {
    document.title = "frontier console (no answer)";
  }
}
poll();
setInterval(poll, 1000);
