#!/usr/bin/env bash
# One GPU lease's verification batch, in stages that each fit a 10-minute device call:
#   bash tools/device_session.sh scaling_a|scaling_b|s29c|tests|perf|scenarios|train|final|measure|profile|async|peers|verify|reliability|trainer
# (verify: the GPU tests plus the measurements that decide issues 3, 6, 7 and 10, in one call)
# (peers: carry .peers from tools/stage_peers.sh; it installs them into ~/peers first)
# Logs go to ${OUT:-.}/<stage>_*.log. Run from the repo root with swarp importable.
set -uo pipefail
out=${OUT:-.}
stage=${1:?stage: s38, s37, s36, s33, s32, scaling_a, scaling_b, s29c, authoring, tests, perf, scenarios, train, final, measure, profile, async, peers, verify, reliability or trainer}
py=python3
ab() {  # name, variants, command: interleaved rounds into $out/ab_<name>.log (AB_LIMIT seconds, ROUNDS rounds)
  VARIANTS="$2" ROUNDS=${ROUNDS:-3} timeout ${AB_LIMIT:-150} bash tools/device_ab.sh "$3" 2>&1 \
    | grep -v "^Module\|^Warp" > /dev/null
  mv "$out/ab.log" "$out/ab_$1.log"; grep "==\|^ *[0-9]" "$out/ab_$1.log" | sed 's/python3.*//'
}
case "$stage" in
s32)
  # Issue 55 in one call: the whole GPU suite in one run (a process history must not break the
  # trainer) beside every scenario's task record with nothing else on seeds 3-5 (never tuned on), in
  # three streams (spread; give_way and drone_navigation; the rest): up to four processes share the
  # GPU, so the training wall-clocks are upper bounds. Then the trainer's speed against the tree
  # before, alone (carry .ab/base: git archive 1700cc2 swarp). SKIP_SUITE=1 / SKIP_AB=1 leave those
  # out. Run folders come back trimmed, in one archive.
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.log"
  if [ -z "${SKIP_SUITE:-}" ] && [ "${PART:-all}" != b ]; then
    (timeout ${SUITE_LIMIT:-420} $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests > "$out/tests_gpu.log" 2>&1
     echo "pytest exit $?" >> "$out/tests_gpu.log") &
  fi
  train_scenarios() {
    for s in "$@"; do
      echo "== $s"
      start=$(date +%s)
      timeout ${LIMIT:-330} $py -m swarp.train "$s" --seeds 3 4 5 --no-progress --run-dir "$out/r/$s/mappo" 2>&1 \
        | grep -v "^Module\|^Warp"
      echo "   ($(( $(date +%s) - start )) s with start-up and scoring)"
    done
  }
  # PART=a: the suite, spread and the short ones; PART=b: give_way and drone_navigation side by side,
  # then the A/B alone (two calls that each fit 10 minutes); unset: all in one call.
  part=${PART:-all}
  [ "$part" = b ] || train_scenarios spread > "$out/train_spread.log" 2>&1 &
  if [ "$part" = b ]; then
    train_scenarios give_way > "$out/train_give_way.log" 2>&1 &
    train_scenarios drone_navigation > "$out/train_drone.log" 2>&1 &
  elif [ "$part" = all ]; then
    train_scenarios give_way drone_navigation > "$out/train_long.log" 2>&1 &
  fi
  [ "$part" = b ] || train_scenarios navigation formation flocking balance sampling transport push_t discovery \
    > "$out/train_short.log" 2>&1
  wait
  [ ! -f "$out/tests_gpu.log" ] || tail -4 "$out/tests_gpu.log"
  cat "$out"/train_*.log | grep "==\|seed\|with start"
  (cd "$out" && find r -name "*.pt" -delete && find r -name "events.out*" -delete && tar czf runs.tgz r && rm -rf r)
  [ -n "${SKIP_AB:-}" ] || [ "${PART:-all}" = a ] || VARIANTS="base:SRC=.ab/base new:SRC=." ROUNDS=${ROUNDS:-2} timeout ${AB_LIMIT:-150} \
    bash tools/device_ab.sh "$py -m swarp.benchmark.train --envs 4096 16384 --iterations 20" 2>&1 | grep -v "^Module\|^Warp"
  ;;
s38)
  # Issue 57's last numbers. PART=a: ncu's per-kernel split of the mask's and the channel's cost (4,096
  # x 16, each beside its full / silent twin), then speaker_listener trained (seeds 0-2) under each
  # of TRAINS ("+" for spaces), one after another and alone on the GPU, within DEADLINE seconds of
  # the call. PART=b: the mask's and the channel's cost against .ab/s38 (the tree before this
  # session's changes), 3 interleaved rounds each, the issue-57 variants' hashes against it on CUDA
  # and the GPU tests of the kernels changed. PART=v: the VMAS mode on CUDA. PART=c: the GPU suite, 200 steps of every
  # scenario against 6defeb3 on CUDA, the continuous path against 6defeb3 (2 rounds).
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.log"
  start_call=$(date +%s)
  bench="$py -m swarp.benchmark.throughput --envs 4096 --agents 16 --iters 300 --repeats 3"
  part=${PART:-a}
  if [ "$part" = a ]; then
    for variant in ${NCU:-navigation navigation+--option+min_agents=16 flocking flocking+--option+comm_dim=4 \
        flocking+--option+comm_dim=4+--option+action_space=discrete}; do
      echo "== ${variant//+/ }"
      timeout 90 /usr/local/cuda/bin/ncu --profile-from-start off --section SpeedOfLight --section Occupancy \
        $py tools/ncu_step.py --envs 4096 --agents 16 --scenario ${variant//+/ } 2>&1 \
        | grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Achieved Occupancy"
    done 2>&1 | tee "$out/ncu.log"
    for run in ${TRAINS:-speaker_listener+--n-envs+1024 speaker_listener+--n-envs+1024+--action-space+discrete}; do
      left=$(( ${DEADLINE:-570} - ($(date +%s) - start_call) ))
      [ "$left" -gt 30 ] || break
      echo "== ${run//+/ } (limit $left s)"
      begin=$(date +%s)
      timeout $left $py -m swarp.train ${run//+/ } --seeds 0 1 2 --no-progress \
        --run-dir "$out/r/$(echo "$run" | tr -c 'a-zA-Z0-9_\n' _)" 2>&1 | grep -v "^Module\|^Warp" | tail -12
      echo "   ($(( $(date +%s) - begin )) s with start-up and scoring)"
    done 2>&1 | tee "$out/train.log"
    (cd "$out" && find r -name "*.pt" -delete && find r -name "events.out*" -delete && tar czf runs.tgz r && rm -rf r)
  elif [ "$part" = v ]; then
    # Issue 58's VMAS mode (carry .whl with vmas 1.5.2, gym 0.26.2, gym-notices, pyglet 1.5.27): its
    # GPU tests (CUDA graph replays, CUDA == CPU), then the Warp step against VMAS's world.step() on
    # CUDA at 4,096 envs, world by world.
    timeout ${SUITE_LIMIT:-200} $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests/physics/test_vmas_mode.py \
      tests/physics/test_vmas_mode_warp.py tests/physics/test_vmas_actions.py > "$out/tests_gpu_v.log" 2>&1
    echo "pytest exit $?" >> "$out/tests_gpu_v.log"; tail -4 "$out/tests_gpu_v.log"
    for world in ${WORLDS:-navigation dispersion balance transport give_way passage wheel sampling}; do
      timeout 90 $py -m swarp.benchmark.vmas_mode --device cuda:0 --envs ${ENVS:-4096} --scenario $world 2>&1 \
        | grep -v "^Module\|^Warp"
    done 2>&1 | tee "$out/vmas_mode.log"
  elif [ "$part" = b ]; then
    ab comm "silent:C=0 talking:C=4 talking_discrete:C=4,AS=discrete talking_s38:C=4,SRC=.ab/s38 ${COMM_EXTRA:-}" \
      "$bench --scenario flocking --option comm_dim=\$C --option action_space=\${AS:-continuous}"
    ab alive "full:OPT=leave_on_goal=False mask:OPT=min_agents=16 mask_s38:OPT=min_agents=16,SRC=.ab/s38" \
      "$bench --option \$OPT"
    timeout ${HASH_LIMIT:-120} $py tools/step_hash.py --variants --trees .ab/s38 . --device cuda:0 2>&1 \
      | tee "$out/hash_variants.log" | tail -2
    if [ -z "${SKIP_TESTS:-}" ]; then
      timeout ${SUITE_LIMIT:-200} $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests/physics/test_neighbors.py \
        tests/scenarios/test_navigation_alive.py tests/scenarios/test_variable_navigation.py tests/env/test_comm.py \
        tests/scenarios/test_speaker_listener.py tests/scenarios/test_flocking.py > "$out/tests_gpu_b.log" 2>&1
      echo "pytest exit $?" >> "$out/tests_gpu_b.log"; tail -4 "$out/tests_gpu_b.log"
    fi
  else
    timeout ${SUITE_LIMIT:-300} $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests > "$out/tests_gpu.log" 2>&1
    echo "pytest exit $?" >> "$out/tests_gpu.log"; tail -8 "$out/tests_gpu.log"
    timeout ${HASH_LIMIT:-100} $py tools/step_hash.py --trees .ab/base57 . --device cuda:0 2>&1 | tee "$out/hash.log" | tail -2
    ROUNDS=2 ab base57 "base57:SRC=.ab/base57 new:SRC=." \
      "$py -m swarp.benchmark.throughput --envs 4096 16384 --agents 3 16 --iters 200 --repeats 3"
  fi
  ;;
s37)
  # Issue 57's channel and departures (carry .ab: base57 = git archive 6defeb3 swarp, the tree the
  # issue started from; s37 = e1fade1, before hearing was folded into the neighbor loop). PART=a: the GPU
  # suite, 200 steps of every scenario against 6defeb3 on CUDA, the continuous path against 6defeb3
  # (2 rounds). PART=b: the cost at 4,096 x 16 of discrete actions (decoded in the first physics
  # launch), of a 4-wide channel (flocking) and of the alive mask (navigation), 3 interleaved
  # rounds each; the new scenarios' throughput. PART=c: training (seeds 0-2) of TRAINS. PART=d: a
  # short lease's essentials. PART=e: ncu's per-kernel split of the mask's and the channel's cost.
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.log"
  bench="$py -m swarp.benchmark.throughput --envs 4096 --agents 16 --iters 300 --repeats 3"
  part=${PART:-a}
  if [ "$part" = a ]; then
    if [ -z "${SKIP_SUITE:-}" ]; then
      timeout ${SUITE_LIMIT:-300} $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests > "$out/tests_gpu.log" 2>&1
      echo "pytest exit $?" >> "$out/tests_gpu.log"; tail -8 "$out/tests_gpu.log"
    fi
    timeout ${HASH_LIMIT:-100} $py tools/step_hash.py --trees .ab/base57 . --device cuda:0 2>&1 | tee "$out/hash.log" | tail -2
    ROUNDS=2 ab base57 "base57:SRC=.ab/base57 new:SRC=." \
      "$py -m swarp.benchmark.throughput --envs 4096 16384 --agents 3 16 --iters 200 --repeats 3"
  elif [ "$part" = d ]; then
    # A short lease's essentials: the channel's and the mask's cost, the new scenarios' throughput,
    # then the two new scenarios trained side by side.
    ROUNDS=2 ab comm "silent:C=0 talking:C=4 talking_discrete:C=4,AS=discrete talking_e1fade1:C=4,SRC=.ab/s37" \
      "$bench --scenario flocking --option comm_dim=\$C --option action_space=\${AS:-continuous}"
    ab alive "full:OPT=leave_on_goal=False mask:OPT=min_agents=16" "$bench --option \$OPT"
    for run in speaker_listener+--agents+2 variable_navigation+--agents+8+--option+min_agents=2; do
      timeout 60 $py -m swarp.benchmark.throughput --scenario ${run//+/ } --envs 4096 --iters 200 --repeats 3 2>&1 \
        | grep -v "^Module\|^Warp" | tail -2
    done 2>&1 | tee "$out/throughput.log"
    for run in ${TRAINS:-speaker_listener variable_navigation}; do
      (timeout ${TRAIN_LIMIT:-150} $py -m swarp.train $run --seeds 0 1 2 --no-progress --run-dir "$out/r/$run" 2>&1 \
        | grep -v "^Module\|^Warp" | tail -8 > "$out/train_$run.log") &
    done
    wait
    tail -n 8 "$out"/train_*.log
    (cd "$out" && find r -name "*.pt" -delete && find r -name "events.out*" -delete && tar czf runs.tgz r && rm -rf r)
  elif [ "$part" = e ]; then
    # Where the mask's and the channel's microseconds go: ncu's kernel durations of one eager step,
    # each variant beside its unmasked / silent twin (4,096 x 16).
    for variant in "navigation" "navigation --option min_agents=16" "flocking" "flocking --option comm_dim=4"; do
      echo "== $variant"
      /usr/local/cuda/bin/ncu --profile-from-start off --section SpeedOfLight --section Occupancy \
        $py tools/ncu_step.py --envs 4096 --agents 16 --scenario $variant 2>&1 \
        | grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Achieved Occupancy"
    done 2>&1 | tee "$out/ncu.log"
  elif [ "$part" = b ]; then
    ab discrete "continuous:AS=continuous discrete:AS=discrete multidiscrete:AS=multidiscrete" \
      "$bench --option action_space=\$AS"
    ab comm "silent:C=0 talking:C=4 talking_discrete:C=4,AS=discrete talking_e1fade1:C=4,SRC=.ab/s37" \
      "$bench --scenario flocking --option comm_dim=\$C --option action_space=\${AS:-continuous}"
    ab alive "full:OPT=leave_on_goal=False mask:OPT=min_agents=16" "$bench --option \$OPT"
    for run in ${RUNS:-speaker_listener+--agents+2 variable_navigation+--agents+8+--option+min_agents=2}; do
      timeout 60 $py -m swarp.benchmark.throughput --scenario ${run//+/ } --envs 4096 --iters 200 --repeats 3 2>&1 \
        | grep -v "^Module\|^Warp" | tail -2
    done 2>&1 | tee "$out/throughput.log"
  else
    # TRAINS and TRAINS2 run as two streams side by side, beside the GPU suite with SUITE=1 (the
    # wall-clocks are then upper bounds).
    if [ -n "${SUITE:-}" ]; then
      (timeout ${SUITE_LIMIT:-400} $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests > "$out/tests_gpu.log" 2>&1
       echo "pytest exit $?" >> "$out/tests_gpu.log") &
    fi
    train_runs() {
      for run in "$@"; do
        echo "== $run"
        start=$(date +%s)
        timeout ${TRAIN_LIMIT:-200} $py -m swarp.train ${run//+/ } --seeds 0 1 2 --no-progress \
          --run-dir "$out/r/$(echo "$run" | tr -c 'a-zA-Z0-9_\n' _)" 2>&1 | grep -v "^Module\|^Warp" | tail -12
        echo "   ($(( $(date +%s) - start )) s with start-up and scoring)"
      done
    }
    [ -z "${TRAINS2:-}" ] || train_runs $TRAINS2 > "$out/train2.log" 2>&1 &
    train_runs ${TRAINS:-speaker_listener} > "$out/train.log" 2>&1
    wait
    cat "$out"/train*.log
    [ ! -f "$out/tests_gpu.log" ] || tail -8 "$out/tests_gpu.log"
    (cd "$out" && find r -name "*.pt" -delete && find r -name "events.out*" -delete && tar czf runs.tgz r && rm -rf r)
  fi
  ;;
s36)
  # Issue 57's groups and discrete cost (carry .ab/base57: git archive 6defeb3 swarp, the tree the
  # issue started from). PART=a: the GPU suite, discrete actions' cost (3 rounds), the continuous
  # path against 6defeb3 at the issue's cells (2 rounds). PART=b: 200 steps of every scenario
  # against 6defeb3 on CUDA (hashes), the discrete cost again, the GPU tests of groups and
  # fleet's throughput. PART=c: the trainer's GPU tests, fleet trained (seeds 0-2), navigation with discrete
  # actions under its task record (acceleration control), seeds 0-2.
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.log"
  if [ "${PART:-a}" = a ]; then
    timeout ${SUITE_LIMIT:-260} $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests > "$out/tests_gpu.log" 2>&1
    echo "pytest exit $?" >> "$out/tests_gpu.log"; tail -8 "$out/tests_gpu.log"
    timeout ${HASH_LIMIT:-100} $py tools/step_hash.py --trees .ab/base57 . --device cuda:0 2>&1 | tee "$out/hash.log" | tail -3
    VARIANTS="continuous:AS=continuous discrete:AS=discrete multidiscrete:AS=multidiscrete" ROUNDS=${ROUNDS:-3} \
      timeout ${DISC_LIMIT:-110} bash tools/device_ab.sh \
      "$py -m swarp.benchmark.throughput --envs 4096 --agents 16 --iters 300 --repeats 3 --option action_space=\$AS" \
      2>&1 | grep -v "^Module\|^Warp" > /dev/null
    mv "$out/ab.log" "$out/ab_discrete.log"; grep "==\|^ *4,096" "$out/ab_discrete.log"
    VARIANTS="base57:SRC=.ab/base57 new:SRC=." ROUNDS=${ROUNDS:-2} timeout ${AB_LIMIT:-150} bash tools/device_ab.sh \
      "$py -m swarp.benchmark.throughput --envs 4096 16384 --agents 3 16 --iters 200 --repeats 3" \
      2>&1 | grep -v "^Module\|^Warp" > /dev/null
    grep "==\|^ *[0-9]" "$out/ab.log"
  elif [ "$PART" = b ]; then
    timeout ${HASH_LIMIT:-150} $py tools/step_hash.py --trees .ab/base57 . --device cuda:0 2>&1 | tee "$out/hash.log" | tail -4
    VARIANTS="continuous:AS=continuous discrete:AS=discrete multidiscrete:AS=multidiscrete" ROUNDS=${ROUNDS:-3} \
      timeout ${DISC_LIMIT:-110} bash tools/device_ab.sh \
      "$py -m swarp.benchmark.throughput --envs 4096 --agents 16 --iters 300 --repeats 3 --option action_space=\$AS" \
      2>&1 | grep -v "^Module\|^Warp" > /dev/null
    mv "$out/ab.log" "$out/ab_discrete.log"; grep "==\|^ *4,096" "$out/ab_discrete.log"
    timeout ${SUITE_LIMIT:-200} $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests/scenarios/test_fleet.py \
      tests/scenarios/test_contract.py tests/env/test_groups.py > "$out/tests_gpu_b.log" 2>&1
    echo "pytest exit $?" >> "$out/tests_gpu_b.log"; tail -4 "$out/tests_gpu_b.log"
    timeout 60 $py -m swarp.benchmark.throughput --scenario fleet --envs 4096 --iters 200 --repeats 3 2>&1 \
      | grep -v "^Module\|^Warp" | tee "$out/fleet_throughput.log" | tail -3
  else
    timeout ${SUITE_LIMIT:-150} $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests/train > "$out/tests_gpu_c.log" 2>&1
    echo "pytest exit $?" >> "$out/tests_gpu_c.log"; tail -4 "$out/tests_gpu_c.log"
    for run in "fleet" "navigation --action-space discrete"; do
      echo "== $run"
      start=$(date +%s)
      timeout ${TRAIN_LIMIT:-250} $py -m swarp.train $run --seeds 0 1 2 --no-progress --run-dir "$out/r/${run%% *}" 2>&1 \
        | grep -v "^Module\|^Warp" | tail -12
      echo "   ($(( $(date +%s) - start )) s with start-up and scoring)"
    done 2>&1 | tee "$out/train.log"
    (cd "$out" && find r -name "*.pt" -delete && find r -name "events.out*" -delete && tar czf runs.tgz r && rm -rf r)
  fi
  ;;
s33)
  # Issue 56 over two calls (carry .ab/base: git archive 1700cc2 swarp). PART=a: the GPU suite in one
  # run beside the kernels' registers and spills (each tree's kernels compiled as PTX into a cache of
  # its own, then ptxas -v), then what reset-ahead buys at the shapes the plan chooses it, alone.
  # PART=b: the renovation's A/B against 1700cc2, interleaved rounds, alone on the GPU.
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.log"
  # PART=all: both in one call under these limits (the A/B's later commands may be cut).
  if [ "${PART:-a}" != b ]; then
    (timeout ${SUITE_LIMIT:-400} $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests > "$out/tests_gpu.log" 2>&1
     echo "pytest exit $?" >> "$out/tests_gpu.log") &
    compile_all="-m swarp.benchmark.scenarios --devices cuda:0 --shapes 256x4 --modes graph --models default diff_drive drone --lidar-rays 0 16 --iters 2 --repeats 1"
    for tree in base new; do
      src=$PWD; [ $tree = base ] && src=$PWD/.ab/base
      PYTHONPATH="$src:$PYTHONPATH" WARP_CACHE_PATH=/tmp/wc_$tree timeout ${SPILL_LIMIT:-300} $py tools/ptxas_spills.py --compile -- \
        $compile_all > "$out/ptx_$tree.log" 2>&1
      grep -c "" "$out/ptx_$tree.log" > /dev/null; find /tmp/wc_$tree -name "*.ptx" | wc -l
    done
    $py tools/ptxas_spills.py /tmp/wc_base /tmp/wc_new 2>&1 | tee "$out/spills.log" | head -40
    wait
    tail -4 "$out/tests_gpu.log"
    VARIANTS="ahead:SRC=. split:SRC=.,PLANARG=--plan,PLANVAL=reset_ahead=False" ROUNDS=${AHEAD_ROUNDS:-2} timeout ${AHEAD_LIMIT:-200} \
      bash tools/device_ab.sh "$py -m swarp.benchmark.throughput --envs 1024 4096 16384 --agents 4 8 16 --iters 200 --repeats 3 \${PLANARG:-} \${PLANVAL:-}" \
      2>&1 | grep -v "^Module\|^Warp" | tee "$out/reset_ahead.log"
    mv "$out/ab.log" "$out/ab_reset_ahead.log"
  fi
  if [ "${PART:-a}" != a ]; then
    VARIANTS="base:SRC=.ab/base new:SRC=." ROUNDS=${ROUNDS:-2} timeout ${AB_LIMIT:-560} bash tools/device_ab.sh \
      "$py -m swarp.benchmark.throughput --envs 1024 4096 16384 --agents 3 16 64 --iters 200 --repeats 3" \
      "$py -m swarp.benchmark.throughput --reset-cost --envs 4096 16384 --agents 8 16 --iters 200 --repeats 3" \
      "$py -m swarp.benchmark.throughput --envs 4096 --agents 16 --lidar-rays 32 --iters 200 --repeats 3" \
      "$py -m swarp.benchmark.throughput --scenario push_t --envs 4096 --agents 4 --iters 200 --repeats 3" \
      "$py -m swarp.benchmark.train --envs 4096 16384 --iterations 20" \
      "$py -m swarp.benchmark.throughput --envs 262144 --agents 3 16 64 --iters 40 --repeats 3" 2>&1 | grep -v "^Module\|^Warp" > /dev/null
    grep -v "^Module\|^Warp" "$out/ab.log" | tail -120
  fi
  ;;
scaling_a)
  # Issue 32 on a multi-GPU host (NVLink multicast off): the NCCL tests on every GPU, then the
  # simulator's weak scaling on 1, 2, 4 and 8 GPUs (as many as the host has), navigation x 16.
  export NCCL_NVLS_ENABLE=0
  n_gpus=$(nvidia-smi -L | wc -l)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.log"
  timeout 240 $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_distributed.py tests/train/test_train_distributed.py \
    2>&1 | tail -6 | tee "$out/tests_nccl.log"
  for n in 1 2 4 8; do
    [ "$n" -le "$n_gpus" ] || break
    echo "== $n GPUs"
    timeout 120 $py -m torch.distributed.run --standalone --nproc-per-node $n -m swarp.benchmark.distributed \
      --envs-per-rank 16384 65536 --agents 16 2>&1 | grep -v "^Module\|^Warp"
  done | tee "$out/scaling_env.log"
  ;;
scaling_b)
  # Issue 32: swarp.train data-parallel on navigation, 4,096 envs a GPU, to 0.95 greedy success, on
  # 1, 2, 4 and 8 GPUs (as many as the host has): end-to-end env-steps/s and time to solve.
  export NCCL_NVLS_ENABLE=0
  n_gpus=$(nvidia-smi -L | wc -l)
  for n in 1 2 4 8; do
    [ "$n" -le "$n_gpus" ] || break
    echo "== $n GPUs"
    timeout 140 $py -m torch.distributed.run --standalone --nproc-per-node $n -m swarp.train navigation --distributed \
      --n-envs $((4096 * n)) --eval-envs $((4096 * n)) --target-success 0.95 --eval-every 2 --max-seconds 100 \
      --no-progress --run-dir "$out/runs_$n" 2>&1 | grep -v "^Module\|^Warp" | tail -4
  done | tee "$out/scaling_train.log"
  ;;
s29c)
  # Issue 31: the throughput table as the plan chooses it (the fused substep on since s30; $PLAN,
  # e.g. "--plan fused_substep=False", fixes fields on top), the auto-reset's and the lidar's ratios.
  { $py -m swarp.benchmark.throughput --envs 1024 4096 16384 --agents 3 16 64 --iters 300 --repeats 3 ${PLAN:-}
    $py -m swarp.benchmark.throughput --envs 262144 --agents 16 --iters 100 --repeats 3 ${PLAN:-}
    $py -m swarp.benchmark.throughput --reset-cost --envs 4096 16384 --agents 8 16 --iters 200 --repeats 3 ${PLAN:-}
    $py -m swarp.benchmark.throughput --envs 4096 --agents 16 --lidar-rays 0 32 --iters 300 --repeats 3 ${PLAN:-}
  } 2>&1 | grep -v "done\|^Module\|^Warp" | tee "$out/s29_numbers.log"
  ;;
authoring)
  # Issue 30: the GPU suite, then a torch-only scenario (the generated template) captured in one
  # CUDA graph against its uncaptured self and fused built-ins, at 4,096 x 16 and 1,024 x 8.
  timeout 240 $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests 2>&1 | tail -15 | tee "$out/tests_gpu.log"
  $py -m swarp.scenario new dispersion2 --dir /tmp/scn --force > /dev/null
  PYTHONPATH="$PYTHONPATH:/tmp/scn" timeout 240 $py -m swarp.benchmark.scenarios --import dispersion2 \
    --scenarios dispersion2 spread navigation --devices cuda:0 --shapes 4096x16 1024x8 --lidar-rays 0 \
    --models default --modes eager torch_graph graph --json "$out/authoring.json" 2>&1 \
    | grep -v "^Module\|^Warp" | tee "$out/authoring.log"
  ;;
trainer2)
  # Issue 26, second lease: the GPU suite, batched seeds at three sizes, a kernel profile, NCCL under
  # torchrun (one rank: the collectives inside the captured update), defaults and bf16 against time to solve.
  timeout 200 $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests 2>&1 | tail -6 | tee "$out/tests_gpu.log"
  timeout 120 $py -m swarp.benchmark.train --envs 512 1024 4096 --runs 1 8 --iterations 10 2>&1 \
    | grep -v "^Module\|^Warp" | tee "$out/train_runs.log"
  timeout 90 $py -m swarp.benchmark.train --envs 4096 --runs 1 8 --iterations 2 --profile 2>&1 \
    | grep -v "^Module\|^Warp" | tee "$out/train_profile.log"
  NCCL_NVLS_ENABLE=0 timeout 90 $py -m torch.distributed.run --standalone --nproc-per-node 1 -m swarp.train navigation \
    --distributed --target-success 0.96 --eval-every 2 --no-progress --run-dir "" 2>&1 | grep "seed\|Error" \
    | tee "$out/train_torchrun.log"
  ;;
trainer3)
  # Issue 26: time to solve navigation against epochs x minibatches, and bf16, seeds 0-2 each.
  for variant in "--epochs 4 --minibatches 4" "--epochs 2 --minibatches 4" "--epochs 4 --minibatches 2" \
                 "--epochs 4 --minibatches 4 --bf16"; do
    for s in 0 1 2; do
      echo "== $variant seed $s"
      timeout 60 $py -m swarp.train navigation --seeds $s --target-success 0.96 --eval-every 2 --eval-envs 4096 \
        --no-progress --run-dir "" $variant 2>&1 | grep "seed"
    done
  done | tee "$out/train_sweep.log"
  ;;
trainer)
  # Issue 26: swarp.train's GPU tests, its speed (graphs against eager, batched seeds, bf16), time
  # to 0.95 on navigation for seeds 0-2, and the A/B against examples/marl_train.py at one batch size
  # (carry .whl with torchrl, tensordict and their pure-Python dependencies).
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.log"
  timeout 120 $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests/train 2>&1 | tail -8 | tee "$out/tests_train_gpu.log"
  timeout 150 $py -m swarp.benchmark.train --envs 4096 16384 --capture both --iterations 20 2>&1 | grep -v "^Module\|^Warp" \
    | tee "$out/train_speed.log"
  timeout 120 $py -m swarp.benchmark.train --envs 4096 --runs 1 8 --iterations 10 2>&1 | grep -v "^Module\|^Warp" \
    | tee "$out/train_runs.log"
  timeout 60 $py -m swarp.benchmark.train --envs 4096 --bf16 --iterations 20 2>&1 | grep -v "^Module\|^Warp" \
    | tee "$out/train_bf16.log"
  for s in 0 1 2; do
    timeout 60 $py -m swarp.train navigation --seeds $s --target-success 0.96 --eval-every 2 --eval-envs 4096 \
      --no-progress --run-dir "$out/runs" 2>&1 | grep "seed"
  done | tee "$out/train_solve.log"
  timeout 90 $py examples/marl_train.py --scenario navigation --seed 0 --total-frames 1310720 --eval-every 0 \
    --no-plot --no-progress --run-dir "$out/marl" 2>&1 | tail -2 | tee "$out/train_marl.log"
  tail -1 "$out"/marl/*/metrics.jsonl >> "$out/train_marl.log"
  ;;
tests)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.log"
  $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests 2>&1 | tee "$out/tests_gpu.log" | tail -40
  ;;
perf)
  $py -m swarp.benchmark.physics --device cuda:0 --envs 16384 --agents 16 64 2>&1 | tail -3 | tee "$out/perf_physics.log"
  $py -m swarp.benchmark.profile_env --kernels --envs 16384 --agents 16 --iters 30 2>&1 | tee "$out/perf_kernels.log"
  $py -m swarp.benchmark.throughput --envs 4096 16384 262144 --agents 3 16 64 --iters 200 --repeats 3 2>&1 \
    | grep -v "done" | tee "$out/perf_throughput.log"
  $py -m swarp.benchmark.throughput --reset-cost --envs 4096 16384 --agents 8 16 --iters 200 --repeats 3 2>&1 | grep -v done | tee "$out/perf_reset.log"
  $py -m swarp.benchmark.throughput --envs 1024 --agents 4 --use-graph false --iters 200 2>&1 | grep -v done | tee "$out/perf_replay.log"
  $py -m swarp.benchmark.grad --device cuda:0 --envs 1024 4096 --repeats 5 2>&1 | grep -v done | tee "$out/perf_grad.log"
  ;;
scenarios)
  $py -m swarp.benchmark.scenarios --devices cuda:0 --shapes 4096x16 --modes graph --iters 200 --repeats 3 2>&1 | tee "$out/scen_graph.log"
  for s in push_t transport; do
    $py -m swarp.benchmark.throughput --scenario $s --envs 4096 16384 --agents 4 --iters 200 --repeats 3 2>&1 | grep -v done
  done | tee "$out/scen_bodies.log"
  $py -m swarp.benchmark.throughput --scenario balance --envs 4096 16384 --agents 3 --iters 200 --repeats 3 2>&1 | grep -v done | tee -a "$out/scen_bodies.log"
  $py -m swarp.benchmark.throughput --envs 4096 --agents 16 --lidar-rays 0 32 --iters 200 --repeats 3 2>&1 | grep -v done | tee "$out/scen_lidar.log"
  $py -m swarp.benchmark.throughput --envs 4096 16384 --agents 16 --per-env-params off on random --iters 200 --repeats 5 2>&1 | grep -v done | tee "$out/scen_params.log"
  $py -m swarp.benchmark.ppo_async --envs 256 4096 16384 --reps 3 --bench-steps 128 --warmup 32 --plot "$out/scen_async.png" 2>&1 | grep -v done | tee "$out/scen_async.log"
  $py -m swarp.benchmark.distributed --device cuda --envs-per-rank 16384 65536 --agents 8 2>&1 | tee "$out/scen_distributed.log"
  timeout 240 $py -m swarp.benchmark.compare_vmas --metric both --envs 4096 16384 --agents 4 16 --json "$out/vmas.json" 2>&1 | tee "$out/scen_vmas.log"
  ;;
train)
  # Issue 27: every registered scenario (or $SCENARIOS) trained with swarp.train and its task record,
  # $PARALLEL runs at a time on one GPU, each for $BUDGET s ($ARGS: extra swarp.train flags), then
  # scored on 4,096 fresh episodes.
  budget=${BUDGET:-40}; parallel=${PARALLEL:-4}
  names=${SCENARIOS:-$($py -c "import swarp; print(' '.join(swarp.scenario_names()))")}
  mkdir -p "$out/runs"
  for s in $names; do
    while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do sleep 1; done
    timeout $((budget + 200)) $py -m swarp.train "$s" --max-seconds "$budget" --eval-every 5 --no-progress \
      --run-dir "$out/runs" ${ARGS:-} > "$out/train_$s.log" 2>&1 &
  done
  wait
  for s in $names; do echo "== $s"; grep -v "^Module\|^Warp" "$out/train_$s.log" | tail -n 3; done | tee "$out/train_summary.log"
  ;;
verify)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.log"
  $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests 2>&1 | tail -15 | tee "$out/tests_gpu.log"
  $py -m swarp.benchmark.throughput --envs 4096 16384 262144 --agents 3 16 64 --iters 100 --repeats 3 2>&1 \
    | grep -v done | tee "$out/throughput.log"
  $py -m swarp.benchmark.throughput --reset-cost --envs 4096 16384 --agents 8 16 --iters 100 --repeats 3 2>&1 \
    | grep -v done | tee "$out/reset.log"
  $py -m swarp.benchmark.scenarios --devices cuda:0 --shapes 4096x16 --modes graph --iters 100 --repeats 3 2>&1 \
    | grep -A14 "Issue 6" | tee "$out/scenarios.log"
  { $py -m swarp.benchmark.throughput --envs 4096 --agents 16 --lidar-rays 0 32 --iters 100 --repeats 3
    $py -m swarp.benchmark.throughput --envs 4096 16384 --agents 16 --per-env-params off on random --iters 100 --repeats 3
  } 2>&1 | grep -v done | tee "$out/lidar_params.log"
  for run in 1 2 3; do
    $py -m swarp.benchmark.throughput --scenario push_t --envs 4096 --agents 4 --iters 100 --repeats 3 2>&1 | tail -1
  done | tee "$out/push_t.log"
  ;;
reliability)
  # Issue 29: the new GPU tests, the 10^6-step soaks, the cost of the health checks (A/B against
  # .ab/base, the tree before them: `git archive <commit> swarp | tar -x -C .ab/base`), the GPU suite.
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.log"
  timeout 110 $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests/runtime/test_health.py tests/env/test_snapshot.py \
    2>&1 | tail -8 | tee "$out/tests_new_gpu.log"
  timeout 200 $py -m swarp.benchmark.soak --device cuda:0 --steps 1000000 --envs 1024 --check-every 50000 \
    --full-check-every 100 --scenarios navigation drone_navigation 2>&1 | grep -v "^Module\|^Warp" | tee "$out/soak_gpu.log"
  VARIANTS="base:SRC=.ab/base new:SRC=." ROUNDS=2 OUT="$out" timeout 150 bash tools/device_ab.sh \
    "$py -m swarp.benchmark.throughput --envs 1024 16384 --agents 16 --iters 200 --repeats 3" \
    "$py -m swarp.benchmark.throughput --scenario drone_navigation --envs 4096 --agents 4 --iters 200 --repeats 3" \
    > /dev/null
  grep -v "^Module\|^Warp" "$out/ab.log" | tail -40
  timeout 120 $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests --durations=10 2>&1 | tail -30 | tee "$out/tests_gpu.log"
  ;;
final)
  # One call: GPU tests plus every number the open issues are judged by (issues 3, 6, 10, 11).
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.log"
  $py -m pytest -q -m gpu -p no:cacheprovider -rfE tests 2>&1 | tail -15 | tee "$out/tests_gpu.log"
  { $py -m swarp.benchmark.physics --device cuda:0 --envs 16384 --agents 16 64 2>&1 | tail -4
    $py -m swarp.benchmark.throughput --envs 4096 16384 262144 --agents 3 16 64 --iters 100 --repeats 3
    $py -m swarp.benchmark.throughput --envs 16384 --agents 16 64 --iters 100 --repeats 3 --option neighbor_method=grid
    $py -m swarp.benchmark.throughput --reset-cost --envs 4096 16384 --agents 8 16 --iters 100 --repeats 3
    $py -m swarp.benchmark.throughput --envs 4096 --agents 16 --lidar-rays 0 32 --iters 100 --repeats 3
    $py -m swarp.benchmark.throughput --envs 4096 16384 --agents 16 --per-env-params off on random --iters 100 --repeats 3
    $py -m swarp.benchmark.throughput --scenario push_t --envs 4096 --agents 4 --iters 100 --repeats 3
    $py -m swarp.benchmark.throughput --scenario give_way --envs 4096 --agents 2 --iters 100 --repeats 3
  } 2>&1 | grep -v done | tee "$out/numbers.log"
  $py -m swarp.benchmark.scenarios --devices cuda:0 --shapes 4096x16 --modes graph --iters 100 --repeats 3 2>&1 \
    | grep -A14 "Issue 6" | tee "$out/scenarios.log"
  timeout 150 $py -m swarp.benchmark.compare_vmas --metric throughput --envs 16384 --agents 16 2>&1 | tail -8 \
    | tee "$out/vmas.log"
  ;;
measure)
  # The open performance targets of issues 3 and 10, plus the per-kernel split behind them.
  { $py -m swarp.benchmark.throughput --envs 4096 16384 262144 --agents 3 16 64 --iters 100 --repeats 3
    $py -m swarp.benchmark.throughput --reset-cost --envs 4096 16384 --agents 8 16 --iters 100 --repeats 3
    $py -m swarp.benchmark.throughput --envs 4096 --agents 16 --lidar-rays 0 32 --iters 100 --repeats 3
  } 2>&1 | grep -v done | tee "$out/measure.log"
  { $py -m swarp.benchmark.profile_env --kernels --envs 4096 --agents 16 --lidar-rays 32 --iters 30
    $py -m swarp.benchmark.profile_env --kernels --envs 4096 16384 --agents 3 16 64 --iters 30
  } 2>&1 | grep -v "^\s*$" | tee "$out/kernels.log"
  for shape in "4096 16 --lidar-rays 32" "16384 64"; do
    set -- $shape
    /usr/local/cuda/bin/ncu --profile-from-start off --kernel-name regex:"observe_rows|scan_fused|nav_finish|nav_reset" \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis $py tools/ncu_step.py --envs $1 --agents $2 ${3:-} ${4:-} 2>&1
  done > "$out/ncu.log"
  grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Thr|Memory Thr|Hit Rate" "$out/ncu.log" | head -80
  ;;
profile)
  # Per-kernel GPU time and stage split of the shapes behind issue 3/10's open targets, plus ncu.
  ncu=/usr/local/cuda/bin/ncu
  { $py -m swarp.benchmark.profile_env --kernels --envs 4096 16384 --agents 3 16 64 --iters 30
    $py -m swarp.benchmark.profile_env --kernels --envs 4096 --agents 16 --lidar-rays 32 --iters 30
  } 2>&1 | tee "$out/kernels.log"
  $py -m swarp.benchmark.profile_env --envs 4096 16384 --agents 3 16 64 --iters 100 2>&1 | tee "$out/stages.log"
  for shape in "4096 16 --lidar-rays 32" "16384 64" "16384 16"; do
    set -- $shape
    $ncu --profile-from-start off --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section WarpStateStats $py tools/ncu_step.py --envs $1 --agents $2 ${3:-} ${4:-} 2>&1
  done > "$out/ncu.log"
  grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Thr|Memory Thr" "$out/ncu.log" | head -150
  ;;
async)
  # Issue 4: the PPO loop, blocking step() vs send/recv vs partial batches, three device placements.
  $py -m pytest -q -p no:cacheprovider -rfE tests/env/test_async.py tests/env/test_pool.py tests/benchmark/test_ppo_async.py 2>&1 | tail -3
  { [ -n "${SKIP_GPU_SIM:-}" ] || echo "== GPU simulator, GPU policy"
    [ -n "${SKIP_GPU_SIM:-}" ] || $py -m swarp.benchmark.ppo_async --envs 256 4096 16384 --reps 5 --bench-steps 128 --warmup 32 \
      --json "$out/async_gpu.json" --plot "$out/async_gpu.png"
    echo "== CPU simulator, GPU policy, 4 groups"
    $py -m swarp.benchmark.ppo_async --device cpu --policy-device cuda:0 --envs 4096 16384 65536 --groups 4 \
      --reps 5 --bench-steps 64 --warmup 16 --json "$out/async_cpu_gpu.json" --plot "$out/async_cpu_gpu.png"
    echo "== CPU simulator, CPU policy"
    $py -m swarp.benchmark.ppo_async --device cpu --envs 256 1024 4096 --groups 4 --reps 5 --bench-steps 64 \
      --warmup 16 --json "$out/async_cpu.json" --plot "$out/async_cpu.png"
  } 2>&1 | grep -v done | tee "$out/async.log"
  ;;
peers)
  $py .peers/install_peers.py .peers
  export PYTHONPATH="$HOME/peers:${PYTHONPATH:-}"
  # Each run's rate is printed as it ends, so a run cut short by the call limit still reports.
  timeout 540 $py -m swarp.benchmark.compare_sims --sims jaxmarl camar --python jaxmarl=$py camar=$py \
    --envs 1024 4096 16384 --agents 3 16 --repeats 3 --json "$out/sims.json" --plot "$out/compare_sims_gpu.png" \
    2>&1 | tee "$out/peers.log" | grep -E "ok|error|skipped|==|^ *[0-9]"
  ;;
esac
