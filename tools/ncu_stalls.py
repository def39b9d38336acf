#!/usr/bin/env python3
"""Where a kernel's warps stall, by source line: PC samples of an Nsight Compute report summed per
line (needs kernels built with -lineinfo, as scripts/gpu_pack.sh does, and the report taken with
--section WarpStateStats --section SourceCounters --import-source yes). Runs where ncu is installed
(its extras/python holds ncu_report):

    python3 tools/ncu_stalls.py REPORT.ncu-rep [LINES]

Prints, per profiled kernel, the LINES (default 25) lines with the most samples, each with its
three most frequent stall reasons."""
import collections
import glob
import sys

for d in glob.glob('/opt/nvidia/nsight-compute/*/extras/python') + glob.glob('/opt/nvidia/nsight-compute/extras/python') + \
        glob.glob('/usr/local/cuda*/nsight-compute*/extras/python'):
    sys.path.append(d)
try:
    import ncu_report
except ImportError:
    sys.exit('ncu_stalls: ncu_report not found (it ships with Nsight Compute, in extras/python)')

SAMPLES = 'smsp__pcsamp_sample_count'
STALL = 'smsp__pcsamp_warps_issue_stalled_'


def line_of(action, pc):
    info = action.source_info(pc)
    return '%s:%d' % (info.file_name().split('/')[-1], info.line()) if info else hex(pc)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    context = ncu_report.load_report(sys.argv[1])
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    for r in range(context.num_ranges()):
        kernels = context.range_by_idx(r)
        for a in range(kernels.num_actions()):
            action = kernels.action_by_idx(a)
            names = [n for n in action.metric_names() if n == SAMPLES or n.startswith(STALL)]
            print('==', action.name())
            if SAMPLES not in names:
                print('   no PC samples in this report (take it with --section SourceCounters)')
                continue
            samples, reasons = collections.Counter(), collections.defaultdict(collections.Counter)
            for name in names:
                metric = action.metric_by_name(name)
                if metric is None or metric.num_instances() == 0:
                    continue
                pcs = metric.correlation_ids()
                for i in range(metric.num_instances()):
                    value = metric.as_double(i)
                    if value == 0:
                        continue
                    where = line_of(action, pcs.as_uint64(i))
                    if name == SAMPLES:
                        samples[where] += value
                    elif not name.endswith('_not_issued'):
                        reasons[where][name[len(STALL):]] += value
            total = sum(samples.values()) or 1
            print('   %d samples' % total)
            for where, value in samples.most_common(top):
                why = ', '.join('%s %d' % (k, v) for k, v in reasons[where].most_common(3))
                print('%6.1f%%  %-34s %s' % (100 * value / total, where, why))


if __name__ == '__main__':
    main()
