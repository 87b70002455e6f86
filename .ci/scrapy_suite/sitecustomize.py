"""Makes frontier's Scheduler and DupeFilter Scrapy's defaults in every Python process of a Scrapy test run
(pytest and the `scrapy` commands its tests start) when FRONTIER_SCRAPY_DEFAULTS=1; .ci/scrapy-suite puts this
folder on PYTHONPATH. FRONTIER_DATA_DIR from the environment, when set, becomes a default too."""

import os

if os.environ.get("FRONTIER_SCRAPY_DEFAULTS") == "1":
    from scrapy.settings import default_settings

    default_settings.SCHEDULER = "frontier.scrapy.Scheduler"
    default_settings.DUPEFILTER_CLASS = "frontier.scrapy.DupeFilter"
    if os.environ.get("FRONTIER_DATA_DIR"):
        default_settings.FRONTIER_DATA_DIR = os.environ["FRONTIER_DATA_DIR"]
