/* timer.h - wall-clock time and memory use, for progress lines and benchmarks. */
#ifndef SELECTIVBENCH_TIMER_H
#define SELECTIVBENCH_TIMER_H

/* Seconds from an arbitrary fixed point (monotonic clock). */
double sb_time_now(void);

/* Peak resident memory of the process so far, in MiB. */
double sb_peak_rss_mib(void);

#endif
