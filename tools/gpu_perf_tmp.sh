set -x
python3 -m swarp.benchmark.physics --device cuda:0 --envs 16384 --agents 16 64 2>&1 | tail -4
python3 -m swarp.benchmark.throughput --envs 4096 16384 262144 --agents 3 16 64 --iters 100 --repeats 3 | grep -v done
python3 -m swarp.benchmark.profile_env --kernels --envs 16384 --agents 16 --iters 30
python3 -m swarp.benchmark.throughput --reset-cost --envs 4096 16384 --agents 8 16 --iters 100 --repeats 3 | grep -v done
python3 -m swarp.benchmark.throughput --envs 1024 --agents 4 --use-graph false --iters 200 | grep -v done
SWARP_LAUNCH_MODE=eager python3 -m swarp.benchmark.throughput --envs 1024 --agents 4 --use-graph false --iters 200 | grep -v done
python3 -m swarp.benchmark.scenarios --devices cuda:0 --shapes 4096x16 --modes graph --iters 100 --repeats 3
for s in push_t transport; do python3 -m swarp.benchmark.throughput --scenario $s --envs 4096 --agents 4 --iters 100 --repeats 3 | grep -v done; done
python3 -m swarp.benchmark.throughput --envs 4096 --agents 16 --lidar-rays 0 32 --iters 100 --repeats 3 | grep -v done
