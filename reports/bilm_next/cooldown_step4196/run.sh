#!/usr/bin/env bash
# Does a cooldown pay in the long run's regime? bilm_next's latest checkpoint, copied twice, continued 100 steps
# at the constant rate vs decayed over those 100 steps (same data order, paired); the held-out perplexity
# (full held-out set) at the end of each is in log.txt and each copy's metrics.jsonl. Safe beside the live run:
# checkpoint.pt is written atomically. Re-running starts afresh from the run's newest checkpoint.
set -e
R=/root/spacy-elmo-runs; D=$R/cooldown_real
cd $R/project
export PYTHONPATH=$R/project PATH=$R/project/.venv/bin:$PATH OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
for v in constant cooldown; do rm -rf $D/$v; cp -r $R/bilm_next $D/$v; done
cp $D/constant/checkpoint.pt $D/cooldown/checkpoint.pt   # the very same start for both
STEP=$(python -c "import torch; print(torch.load('$D/constant/checkpoint.pt', map_location='cpu', weights_only=False)['step'])")
echo "start: step $STEP"
for v in constant cooldown; do
  c=0; [ $v = cooldown ] && c=100
  python -m spacy_elmo pretrain configs/pretrain_en_wide.cfg $D/$v --no-progress \
    --paths.train corpus/pretrain/train.txt --paths.dev corpus/pretrain/dev.txt \
    --paths.init_dir spacy_elmo/data/default_bilm \
    --system.threads 1 --training.max_steps $((STEP + 100)) --training.cooldown_steps $c --training.eval_every_steps 1000
done
