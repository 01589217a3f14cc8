#!/usr/bin/env bash
# The GPU benchmark batch recorded in docs/benchmarks.md. Run from the repo root on a CUDA machine
# with swarp importable; logs go to ${OUT:-.}/bench_*.log.
set -uo pipefail
out=${OUT:-.}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/bench_gpu.log"
python3 -m swarp.benchmark.physics --device cuda:0 --envs 1024 16384 65536 --agents 4 16 64 2>&1 | tee "$out/bench_physics.log"
python3 -m swarp.benchmark.profile_env --envs 4096 16384 --agents 3 16 64 2>&1 | tee "$out/bench_profile.log"
python3 -m swarp.benchmark.throughput --envs 1024 4096 16384 65536 262144 --agents 3 4 16 64 --repeats 3 2>&1 | tee "$out/bench_throughput.log"
python3 -m swarp.benchmark.throughput --reset-cost --envs 4096 16384 --agents 8 16 2>&1 | tee "$out/bench_reset.log"
python3 -m swarp.benchmark.throughput --envs 1024 --agents 4 --use-graph false 2>&1 | tee "$out/bench_replay.log"
SWARP_LAUNCH_MODE=eager python3 -m swarp.benchmark.throughput --envs 1024 --agents 4 --use-graph false 2>&1 | tee -a "$out/bench_replay.log"
for scenario in push_t transport balance; do
  python3 -m swarp.benchmark.throughput --scenario "$scenario" --envs 1024 4096 16384 65536 --agents 4 --repeats 3 2>&1 | tee -a "$out/bench_bodies.log"
done
# Issue 11: ablation and cross-simulator comparisons. The JAX peers need jaxmarl/camar (pure-Python
# wheels staged with ../shared/device/stage.sh, see docs/benchmarks.md) importable by $PEER_PYTHON.
peer_python=${PEER_PYTHON:-python3}
python3 -m swarp.benchmark.ablation --envs 1024 4096 16384 --agents 3 16 2>&1 | tee "$out/bench_ablation.log"
python3 -m swarp.benchmark.compare_vmas --metric both --envs 1024 4096 16384 --agents 4 16 --plot "$out/compare_vmas_gpu.png" --json "$out/compare_vmas_gpu.json" 2>&1 | tee "$out/bench_compare_vmas.log"
# One peer per command: every (simulator, config) is its own process, and JAX compiles in each.
for peer in vmas jaxmarl camar; do
  python3 -m swarp.benchmark.compare_sims --sims swarp "$peer" --python "jaxmarl=$peer_python" "camar=$peer_python" --envs 1024 4096 16384 --agents 3 16 --json "$out/compare_sims_gpu_$peer.json" 2>&1 | tee "$out/bench_compare_sims_$peer.log"
done
