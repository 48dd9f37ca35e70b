# Compressed chunks (docs/format.md, TPROF_CHUNK_F_ZSTD): the reader against whole,
# tampered and hostile compressed chunks and the report of a run rewritten compressed
# (test_zchunks), and a reader built without libzstd (test_zchunks_nozstd). Both compress
# with the writer's packer (src/format/zchunk.c, libzstd.so.1 loaded at run time).
if(TPROF_HAVE_ZSTD)
  tprof_add_unit(test_zchunks test_zchunks.c synth.c ${CMAKE_SOURCE_DIR}/src/format/zchunk.c
    LIBS tprof_analysis ${CMAKE_DL_LIBS} LABELS reliability)
  target_compile_definitions(test_zchunks PRIVATE TPROF_HAVE_ZSTD=1)

  tprof_add_unit(test_zchunks_nozstd test_zchunks.c synth.c reader_nozstd.c
    ${CMAKE_SOURCE_DIR}/src/format/crc.c ${CMAKE_SOURCE_DIR}/src/format/zchunk.c
    LIBS ZLIB::ZLIB ${CMAKE_DL_LIBS} LABELS reliability)
  target_include_directories(test_zchunks_nozstd PRIVATE ${CMAKE_SOURCE_DIR}/include
    ${ZSTD_INCLUDE_DIR})
  target_compile_definitions(test_zchunks_nozstd PRIVATE TPROF_HAVE_ZSTD=1 TPROF_TEST_NOZSTD=1)
endif()
