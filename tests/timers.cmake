# Megatron-compatible Timers: golden text, registry rules, known sleep, trace ranges, and
# the report's timers tables on synthetic ranks.
tprof_add_unit(test_timers test_timers.c synth.c LIBS trainprof tprof_analysis)
