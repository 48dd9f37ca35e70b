# Megatron-compatible Timers: golden text, registry rules, known sleep, trace ranges.
tprof_add_unit(test_timers test_timers.c LIBS trainprof tprof_analysis)
