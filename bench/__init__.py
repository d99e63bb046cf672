"""eagle-audit's benchmarks: speed/ (how fast), evidence/ (what is found, on what), tools/ (builders), data/ (prompts); the index is bench/README.md."""
