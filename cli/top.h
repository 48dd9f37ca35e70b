/* top.h — `trainprof top`: a live terminal view of a running job's ranks (or of a node's
 * GPUs) from their Prometheus endpoints (docs/cli.md, docs/metrics.md). */
#ifndef TPROF_TOP_H
#define TPROF_TOP_H

/* argv after "top"; returns the exit status (0 = at least one endpoint answered, 1 = none,
 * 2 = usage error). */
int cmd_top(int argc, char **argv);

#endif
