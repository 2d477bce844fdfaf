"""The QLoRA fine-tune that train.py runs: arguments (args) parsed into one TrainConfig (config), data reading
and rendering (rows, format, templates, data), model loading (model, attention, distributed), TRL's SFTTrainer
(trainer, checkpoints, metrics), the run itself (run), the merge, the held-out evaluation, the model card, the
saved model's facts (facts) and the report; pretrain and tiny build the small local bases. Imported from the
job's folder, no install: SageMaker runs train.py beside it."""
