"""The URL Frontier gRPC service (crawler-commons/url-frontier API v2.x): `python -m frontier serve`.

Owns: the .proto and the stubs grpcio-tools generates from it (urlfrontier_pb2*.py, checked in), the store of
every crawl a server holds (model: what both stores take and give; store and lmdb_crawl: LMDB, a URLSeen per
crawl; redis_store: Redis, the crawl state's seen-set chunks), the service (server: grpc.aio), who may call it
(security) and the command (cli; its options in options, which import no grpc, so that `python -m frontier`
builds its parser without the extra). May import frontier's core (errors, config, url, seen, state; config files
via cli.ops); nothing in frontier imports it but frontier.__main__ (options), so `import frontier` never imports
grpc. Needs the `service` extra (grpcio, protobuf).
"""
