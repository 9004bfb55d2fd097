"""rankd's model zoo: the benchmark workloads of WORKLOADS.md in plain PyTorch, a deterministic
power-law request generator, and an exporter writing rankd model packages with reference outputs."""
