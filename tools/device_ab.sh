#!/usr/bin/env bash
# A/B on the device: each benchmark command runs under every variant, in ROUNDS interleaved rounds.
#   VARIANTS="base:SRC=.ab/base new:SRC=." bash tools/device_ab.sh "python -m ..." "python -m ..."
# A variant is label:VAR=value[,VAR=value] (environment variables). SRC=dir runs the command from dir, so `python -m swarp...`
# imports that copy of swarp (make one from another commit and carry it:
# `mkdir -p .ab/base && git archive <commit> swarp | tar -x -C .ab/base`). Logs: ${OUT:-.}/ab.log.
set -uo pipefail
out=${OUT:-.}
rounds=${ROUNDS:-2}
for round in $(seq 1 "$rounds"); do
  for cmd in "$@"; do
    for variant in $VARIANTS; do
      label=${variant%%:*}
      settings=${variant#*:}
      src=.
      assignments=()
      for setting in ${settings//,/ }; do
        case "$setting" in
          SRC=*) src=${setting#SRC=} ;;
          *=*) assignments+=("$setting") ;;
        esac
      done
      echo "== round $round | $label | $cmd"
      (cd "$src" && env ${assignments[@]+"${assignments[@]}"} bash -c "$cmd") 2>&1 | grep -v "done\|^$"
    done
  done
done 2>&1 | tee -a "$out/ab.log"
