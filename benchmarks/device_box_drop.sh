#!/usr/bin/env bash
# box_drop and boxes8 on a lent GPU: jaxcontact and MJX tuned on one machine, back to back.
#
# Run from the repository root on the device machine (the `device` tool), with the MuJoCo and
# MJX wheels in .whl/ (MJX runs through benchmarks/mjx.py, which travels with the checkout):
#
#   bash benchmarks/device_box_drop.sh            # results under $OUT (or /tmp/device_out)
#
# Each part has its own time limit, so one that hangs leaves the others' results. The order is
# the order of importance: box_drop in jaxcontact, box_drop in MJX tuned, then boxes8 in both.
set -u
OUT=${OUT:-/tmp/device_out}
mkdir -p "$OUT"
if [ -z "${NO_WHEELS:-}" ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
STEPS=${STEPS:-500}          # STEPS=20 JC_BATCH="1 4" MJX_BATCH=4 B8_BATCH=4: a local smoke test
JC_BATCH=${JC_BATCH:-1 64 1024 4096}
MJX_BATCH=${MJX_BATCH:-64 1024 4096}
B8_BATCH=${B8_BATCH:-1024}
PY=${PY:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
$PY -c "import jax, mujoco; print('jax', jax.__version__, jax.devices(), 'mujoco', mujoco.__version__)"

PARTS=${PARTS-jc_box_drop mjx_box_drop jc_boxes8 mjx_boxes8}  # which parts run

part() {  # part NAME LIMIT_S COMMAND...: stdout to NAME.json, stderr to NAME.log
  local name=$1 limit=$2; shift 2
  case " $PARTS " in *" $name "*) ;; *) return ;; esac
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.json" 2>"$OUT/$name.log"
  echo "$name: rc $? in $((SECONDS - t0)) s"
}

part jc_box_drop 200 $PY -m benchmarks.throughput --batch $JC_BATCH --steps $STEPS --dtypes float32 \
  --skip-mjx --min-time-s 1 --name device_box_drop
part mjx_box_drop 100 $PY -m benchmarks.mjx box_drop --batch $MJX_BATCH --steps $STEPS --tuned
part jc_boxes8 160 $PY -m benchmarks.throughput --scene boxes8 --batch $B8_BATCH --steps $STEPS --dtypes float32 \
  --skip-mjx --repeats 2 --min-time-s 0 --name device_boxes8
part mjx_boxes8 80 $PY -m benchmarks.mjx boxes8 --batch $B8_BATCH --steps $STEPS --tuned

$PY - "$OUT" <<'EOF'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
def load(name):
    try:
        text = (out / f"{name}.json").read_text()  # MJX prints warnings before its JSON line
        return json.loads(text[text.index("{"):] if text.startswith("{") else text.splitlines()[-1])
    except Exception as e:  # noqa: BLE001 - a part that failed has no JSON
        return {"error": repr(e)}
for scene in ("box_drop", "boxes8"):
    jc, mjx = load(f"jc_{scene}"), load(f"mjx_{scene}")
    m = {r["batch"]: r for r in mjx.get("rows", [])}
    rows = jc.get("jaxcontact", {}).get("float32", {}).get("rows", [])
    if "error" in jc or "error" in mjx:
        print(scene, "missing:", jc.get("error"), mjx.get("error"))
    for r in rows:
        b = r.get("batch"); mr = m.get(b, {})
        print(scene, b, "jc", round(r.get("steps_per_s", 0)), "compile", r.get("compile_s"),
              "conv", r.get("converged_fraction"), "z", r.get("z_mean"),
              "| mjx", round(mr.get("steps_per_s", 0)), "compile", mr.get("compile_s"), "z", mr.get("z_mean"),
              "| ratio", round(r["steps_per_s"] / mr["steps_per_s"], 3) if mr else None)
    print(scene, "mujoco C", mjx.get("mujoco_c"))
EOF
