# The op layer's test files, derived from their markers (pyproject.toml): `kernel` marks an op
# family's kernel tests (run by .ci/isa once per ISA level), `op_layer` the op layer's other tests
# (bindings, fakes, generator, extremes; .ci/compat runs both per torch release). A new op's test
# file carries `pytestmark = pytest.mark.kernel` and is picked up; tests/test_ci_paths.py checks that
# every op family has one. Sourced from the repository root.
mapfile -t kernel_tests < <(grep -rlE --include='test_*.py' '^pytestmark = .*pytest\.mark\.kernel\b' tests | sort)
mapfile -t op_layer_tests < <(grep -rlE --include='test_*.py' '^pytestmark = .*pytest\.mark\.op_layer\b' tests | sort)
