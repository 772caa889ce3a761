#!/usr/bin/env bash
# session 11, call 6 (nvidia-h200): the landed build through the CLI (DEFAULT_BATCH_TOKENS 32768
# changes the chunks of every forward): fixtures vs HF bf16 (step 1), --pool mean (step 6), and
# 400 photos end to end (steps 2 and 4: exit status, every input ok, rates).
set -u
E2E_STEPS="1 2 4 6" E2E_PHOTOS=400 E2E_HF=0 timeout 230 bash scripts/device-e2e.sh 2>&1 | tail -25
