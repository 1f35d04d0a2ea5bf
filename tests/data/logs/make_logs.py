#!/usr/bin/env python3
"""Writes the training-log fixtures of tests/formats_logs with the frameworks' own format expressions
(copied, not paraphrased; README.md cites each file). Deterministic: rerun to regenerate.
    python3 tests/data/logs/make_logs.py tests/data/logs
"""
import sys
from datetime import datetime, timedelta
from pathlib import Path

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
T0 = datetime(2026, 11, 30, 9, 0, 0)

# --- Megatron-LM (NVIDIA/Megatron-LM d98e8a6) ------------------------------------------------------
MEGATRON_ARGS = dict(
    num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32,
    group_query_attention=True, num_query_groups=8, seq_length=8192, max_position_embeddings=8192,
    micro_batch_size=1, global_batch_size=128, tensor_model_parallel_size=2,
    pipeline_model_parallel_size=1, context_parallel_size=1,
    num_layers_per_virtual_pipeline_stage=None, world_size=8, data_parallel_size=4,
    sequence_parallel=True, use_distributed_optimizer=True, overlap_grad_reduce=True,
    overlap_param_gather=True, recompute_granularity=None, recompute_method=None,
    bf16=True, fp16=False, fp8=None, tp_comm_overlap=False, swiglu=True,
    untie_embeddings_and_output_weights=True, padded_vocab_size=128256, normalization='RMSNorm',
    position_embedding_type='rope', lr=0.0003, seed=1234, train_iters=500, log_interval=10,
    tokenizer_type='HuggingFaceTokenizer', tokenizer_model='meta-llama/Meta-Llama-3-8B',
    transformer_impl='transformer_engine', add_bias_linear=False, norm_epsilon=1e-05, rotary_base=500000,
    kv_channels=128, vocab_size=None, make_vocab_size_divisible_by=128, use_mcore_models=True,
)


def megatron_args_block(args, title='arguments'):
    """megatron/training/arguments.py _print_args."""
    lines = [f'------------------------ {title} ------------------------']
    str_list = []
    for arg in args:
        dots = '.' * (48 - len(arg))
        str_list.append('  {} {} {}'.format(arg, dots, args[arg]))
    for arg in sorted(str_list, key=lambda x: x.lower()):
        lines.append(arg)
    lines.append(f'-------------------- end of {title} ---------------------')
    return lines


def megatron_iteration(iteration, train_iters, ms, batch_size=128, loss=2.5, when=T0):
    """megatron/training/training.py training_log (log_throughput off, no energy)."""
    log_string = f" [{when.strftime('%Y-%m-%d %H:%M:%S.%f')}]"
    log_string += ' iteration {:8d}/{:8d} |'.format(iteration, train_iters)
    log_string += ' consumed samples: {:12d} |'.format(iteration * batch_size)
    log_string += ' elapsed time per iteration (ms): {:.1f} |'.format(ms)
    log_string += f' learning rate: {3e-4:.6E} |'
    log_string += f' global batch size: {batch_size:5d} |'
    log_string += ' {}: {:.6E} |'.format('lm loss', loss)
    log_string += f' loss scale: {1.0:.1f} |'
    log_string += f' grad norm: {1.234:.3f} |'
    log_string += ' number of skipped iterations: {:3d} |'.format(0)
    log_string += ' number of nan iterations: {:3d} |'.format(0)
    return log_string


# Interval means (ms): the first holds the first iteration's set-up; the second still settles.
MEGATRON_MS = [21843.7, 18012.4, 16488.2, 16512.9, 16471.3, 16530.6, 16495.0, 16502.8, 16519.4, 16480.1]


def megatron_log(ms_list=MEGATRON_MS, args=MEGATRON_ARGS):
    lines = ['using world size: 8, data-parallel size: 4, context-parallel size: 1, tensor-model-parallel size: 2, pipeline-model-parallel size: 1']
    lines += megatron_args_block(args)
    lines += ['> building HuggingFaceTokenizer tokenizer ...', '[after training is done] datetime: ...'][:1]
    t = T0
    for k, ms in enumerate(ms_list):
        t += timedelta(milliseconds=10 * ms)
        lines.append(megatron_iteration(10 * (k + 1), args['train_iters'], ms, when=t, loss=3.0 - 0.05 * k))
    return lines


def write(name, lines, newline_at_end=True):
    text = '\n'.join(lines) + ('\n' if newline_at_end else '')
    (OUT / name).write_text(text)


write('megatron_llama8b_tp2.log', megatron_log())
# Hostile Megatron logs.
full = megatron_log()
cut = full[:-2] + [full[-2][:120]]  # killed while printing: the last timing line ends mid-line
write('megatron_truncated.log', cut, newline_at_end=False)
other = megatron_log([m * 1.3 for m in MEGATRON_MS])
head = len(full) - len(MEGATRON_MS)
write('megatron_interleaved.log', full[:head + 5] + other[head:head + 3] + full[head + 5:])
bad = list(full)
bad[head + 4] = bad[head + 4].replace('elapsed time per iteration (ms): 16471.3', 'elapsed time per iteration (ms): nan(ind)')
write('megatron_not_a_number.log', bad)
write('megatron_no_arguments.log', [full[0]] + full[head:])

# --- NeMo 2 (NVIDIA/NeMo 8cfedd7) -------------------------------------------------------------------
def nemo_format_string(prefix, metrics):
    """nemo/lightning/pytorch/callbacks/progress_printer.py ProgressPrinter.format_string."""
    log_string = prefix
    for metric, val in metrics.items():
        if isinstance(val, (float)) and val.is_integer():
            val = int(val)
            log_string += f' | {metric}: {val}'
        else:
            log_string += f' | {metric}: {val:.4}'
    return log_string


NEMO_S = [9.812, 7.961, 7.549, 7.556, 7.561, 7.566, 7.559, 7.568, 7.572, 7.572]


def nemo_log(times=NEMO_S, log_interval=1, total=20):
    lines = ['[NeMo I 2026-11-30 09:00:00 nemo_logging:393] Experiments will be logged at /results/llama3_8b']
    for k, s in enumerate(times):
        n = (k + 1) * log_interval  # trainer.strategy.current_epoch_step after the step
        prefix = 'Training' + f" epoch {0}, iteration {n-1}/{total-1}"
        metrics = {'lr': 1.499e-07 * n, 'global_batch_size': 512.0, 'global_step': float(n - 1),
                   'reduced_train_loss': 11.03, 'train_step_timing in s': s, 'consumed_samples': 512.0 * n}
        lines.append(nemo_format_string(prefix, metrics))
    return lines


write('nemo_llama8b.log', nemo_log())


def nemo_delta_log(times=NEMO_S):
    """nemo/utils/exp_manager.py DeltaTimingCallback._on_batch_end, through NeMo's logger."""
    lines = []
    for step, dt in enumerate(times):
        lines.append(f'[NeMo I 2026-11-30 09:00:{step:02d} exp_manager:450] ' + f'Step {step}: {"train_step_timing"} in s={dt}')
    return lines


write('nemo_delta_timing.log', nemo_delta_log())

# --- torchtitan (pytorch/torchtitan b5bcd76) --------------------------------------------------------
def titan_line(step, loss, grad_norm, gib, pct, tps, tflops, mfu):
    """torchtitan/components/metrics.py MetricsProcessor.log (no colours), through the logger of
    torchtitan/tools/logging.py: "[titan] %(asctime)s - %(name)s - %(levelname)s - %(message)s"."""
    mfu_str = f"{mfu:.2f}%" if mfu is not None else "N/A"
    message = (
        f"step: {step:2}  "
        f"loss: {loss:8.5f}  "
        f"grad_norm: {grad_norm:7.4f}  "
        f"memory: {gib:5.2f}GiB"
        f"({pct:.2f}%)  "
        f"tps: {round(tps):,}  "
        f"tflops: {tflops:,.2f}  "
        f"mfu: {mfu_str}"
    )
    return f"[titan] 2026-11-30 09:00:{step % 60:02d},123 - root - INFO - {message}"


# LLaMA 3 8B, 8 GPUs FSDP (dp 8), local batch 1 x seq 8192: global 8 x 8192 tokens per step.
TITAN_TPS = [312.4, 6021.8, 6433.0, 6440.7, 6428.9, 6437.2, 6431.5, 6442.3, 6429.8, 6436.6]


def titan_log(freq=10):
    lines = ['[titan] 2026-11-30 09:00:00,001 - root - INFO - Starting job: Llama 3 8B training']
    for k, tps in enumerate(TITAN_TPS):
        step = 1 if k == 0 else freq * k
        lines.append(titan_line(step, 12.0 - 0.3 * k, 1.5, 61.43, 64.67, tps, 334.56 * tps / 6433.0, 33.83 * tps / 6433.0))
    lines.append('[titan] 2026-11-30 09:10:00,001 - root - INFO - validate step: 90  loss:  7.1234  memory: 61.43GiB(64.67%)  tps: 19,876')
    return lines


write('torchtitan_llama8b.log', titan_log())
