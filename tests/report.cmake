# Report figures on synthetic runs with known answers.
tprof_add_unit(test_report test_report.c synth.c LIBS tprof_analysis)
