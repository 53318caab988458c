#!/usr/bin/env bash
# tests/test_docs.py on the device tool's TPU VM, set up so that only the CPU differs from the dev machine
# (tests/data/docs_two_cpus.json): the chip hidden and the checkout laid out as the editable install has it
# (docs_vm_site/sitecustomize.py), the same jax and libtpu (the VM's own; the probe prints both), graphviz's
# dot carried (the VM has none; export --svg needs it). Prepare, on the dev machine, in an ignored folder
# CARRY of the checkout the tool sends (named in .git/info/exclude and in the call's carry):
#   wheels/  `pip wheel --no-deps . -w CARRY/wheels` and `pip download --no-deps` of textual, rich, graphviz,
#            markdown-it-py, mdurl, linkify-it-py, uc-micro-py, mdit-py-plugins, platformdirs, typing_extensions,
#            pygments, pytest, pluggy, iniconfig, packaging, pytest-xdist, execnet (.ci/constraints.txt's versions)
#   repo.tar `git archive -o CARRY/repo.tar HEAD`;  site/  a copy of tests/bench/docs_vm_site/
#   cpuid    `gcc -O1 -static -o CARRY/cpuid tests/bench/docs_vm_site/cpuid.c` (lscpu says "unknown" there)
#   gv/      dot and its libraries (ldd /usr/bin/dot) in gv/real and gv/lib, the core and dot_layout plugins
#            in gv/plugins (then `dot -c` with GVBINDIR=gv/plugins), and gv/bin/dot a wrapper that sets
#            LD_LIBRARY_PATH and GVBINDIR (the dev machine's glibc, 2.36, is the VM's)
# Run: CARRY=.carry bash CARRY/docs_on_vm.sh  (writes $OUT/vm.log, pytest.log, vm-junit.xml, gmm.txt)
set -u
C=$PWD/${CARRY:-.carry}; exec > >(tee -a "$OUT/vm.log") 2>&1
echo "=== probe $(date -u)"; lscpu | grep -E "Model name|^CPU\(s\)|Flags"; "$C/cpuid"
python3 -c 'import importlib.metadata as m; print("jax", m.version("jax"), "jaxlib", m.version("jaxlib"), "libtpu", m.version("libtpu"))'
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$C"/wheels/*.whl || exit 1
R=/tmp/repo; mkdir -p $R && tar xf "$C/repo.tar" -C $R && cd $R
export H_DOCS_REPO=$R PYTHONPATH=$C/site:/tmp/site:${PYTHONPATH:-} PATH=/tmp/site/bin:$PATH:$C/gv/bin PYTHONUNBUFFERED=1 PYTHONSAFEPATH=1 COLUMNS=100
python3 -c 'import inspector.kernels; from inspector.compilation.default_target import default_target; print(inspector.kernels.__file__, default_target("show"))'
timeout 420 python3 -m pytest -q -o addopts="" -p no:cacheprovider -n 6 --dist load tests/test_docs.py -rA --junitxml="$OUT/vm-junit.xml" > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -3 "$OUT/pytest.log"
timeout 150 inspector diff tests/data/diff_kernels.py:gmm_f32 --runs 0 > "$OUT/gmm.txt" 2>&1; head -8 "$OUT/gmm.txt"
