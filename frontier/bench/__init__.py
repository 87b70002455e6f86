"""Benchmarks: `python -m frontier.bench <command>`; see `frontier.bench.__main__.COMMANDS`.

Each command is a module with `main(argv: list[str]) -> int` that prints its own table. The stream
generator in `frontier.bench.stream` is shared by them. Benchmarks use the dev extras (`.[bench]`);
`import frontier` never imports this package. A tool beside the library: it may import every part of frontier,
frontier.testing, and workers (to run and profile the fetch side).
"""
