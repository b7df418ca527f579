"""How the suite compiles (imported by conftest.py before JAX starts; no JAX here)."""

# XLA compiles the suite's programs with LLVM at -O0 and its older (non-MLIR) fusion emitters;
# users' programs get XLA's defaults (-O3, fusion emitters). Compiling is most of the suite's
# time and these take about half off it (figures in benchmarks/README.md), while the tests
# check numbers, not speed: the code is the same, only its rounding may differ in the last
# bits, which every tolerance here must allow anyway (XLA fuses differently on other CPUs too).
# test_selection, which checks the compiled tangents that fusion can break, compiles with
# users' settings (USERS_COMPILER_OPTIONS), and so do the few programs that run longer than
# they compile.
SUITE_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"
USERS_COMPILER_OPTIONS = {"xla_backend_optimization_level": 3, "xla_cpu_use_fusion_emitters": True}
