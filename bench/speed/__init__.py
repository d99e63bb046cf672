"""Benchmarks of speed: how long a command or a step takes, on the machine named in its record."""
