#!/usr/bin/env bash
# Stage the JAX peers (jaxmarl 0.2.0, camar 0.4.0) for the GPU machine, which has JAX, flax,
# chex and optax but no registry access: writes the ignored folder .peers/ (~42 MB, one device
# call's carry) with their wheels and the pure-Python or cp312 dependencies such a machine may lack,
# plus tools/install_peers.py's copy. On the device:
#   python3 .peers/install_peers.py .peers        # installs only what is not importable, into ~/peers
#   PYTHONPATH=~/site:~/peers:$PWD python3 -m swarp.benchmark.compare_sims --sims jaxmarl camar \
#     --python jaxmarl=python3 camar=python3
# (or: bash tools/device_session.sh peers)
set -euo pipefail
top=$(git rev-parse --show-toplevel)
cd "$top"
grep -qx "/.peers/" .git/info/exclude 2>/dev/null || echo "/.peers/" >> .git/info/exclude
rm -rf .peers && mkdir -p .peers
plat=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any)
python3 -m pip download -q --no-deps "${plat[@]}" -d .peers \
  jaxmarl==0.2.0 camar==0.4.0 gymnax==1.0.1 "gymnasium==1.2.2" farama-notifications \
  matplotlib pillow kiwisolver fonttools contourpy msgpack pyyaml safetensors absl-py rich \
  markdown-it-py mdurl pygments toolz pyparsing python-dateutil cycler packaging six seaborn \
  pandas pytz tzdata
cp tools/install_peers.py .peers/
du -sh .peers
