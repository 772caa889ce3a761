#!/usr/bin/env python3
"""smi_summary.py CSV - one line from nvidia-smi samples (--query-gpu=clocks.sm,clocks.mem,
power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader,nounits): the
samples taken while the GPU was busy (power over 150 W), their median and
lowest SM clock, median memory clock, median and highest power, highest temperature, and the
share of those samples under each throttle reason nvidia-smi reports (the NVML bitmask).
Used by scripts/device-run.sh's clocks step."""
import statistics
import sys

REASONS = {0x1: "idle", 0x2: "app_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal",
           0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clocks"}

rows = []
for line in open(sys.argv[1]):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 5:
        continue
    try:
        sm, mem, pw, temp = (float(parts[i]) for i in range(4))
        reasons = int(parts[4], 16)
    except ValueError:
        continue
    rows.append((sm, mem, pw, temp, reasons))
busy = [r for r in rows if r[2] > 150.0]
if not busy:
    print("  no busy samples (%d in all)" % len(rows))
    sys.exit(0)
sm = [r[0] for r in busy]
share = {name: sum(1 for r in busy if r[4] & bit) / len(busy) for bit, name in REASONS.items()}
print("  %d busy samples of %d: SM clock median %.0f MHz (lowest %.0f), memory %.0f MHz, power median %.0f W "
      "(highest %.0f), temperature up to %.0f C; throttled: %s" % (
          len(busy), len(rows), statistics.median(sm), min(sm), statistics.median(r[1] for r in busy),
          statistics.median(r[2] for r in busy), max(r[2] for r in busy), max(r[3] for r in busy),
          ", ".join("%s %.0f%%" % (k, 100 * v) for k, v in share.items() if v > 0) or "never"))
