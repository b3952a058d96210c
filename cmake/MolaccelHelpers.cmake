# Helpers shared by every engine's CMakeLists.txt.

# molaccel_add_test(NAME <name> SOURCES <files...> LABELS cpu|gpu [TIMEOUT <s>])
# One GoogleTest executable; each TEST is a CTest test carrying the labels. GPU tests call
# GTEST_SKIP() when no GPU is present; CTest then reports them as skipped, never passed.
function(molaccel_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE molaccel molaccel_testing GTest::gtest GTest::gtest_main ${T_LIBS})
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(${T_NAME} PRIVATE
    MOLACCEL_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    $<$<BOOL:${MOLACCEL_WITH_CUDA}>:MOLACCEL_HAVE_CUDA=1>)
  gtest_discover_tests(${T_NAME}
    PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
               SKIP_REGULAR_EXPRESSION "  SKIPPED "
    DISCOVERY_TIMEOUT 120)
endfunction()

# molaccel_add_bench(NAME <name> SOURCES <files...>)
function(molaccel_add_bench)
  cmake_parse_arguments(B "" "NAME" "SOURCES;LIBS" ${ARGN})
  add_executable(${B_NAME} ${B_SOURCES})
  target_link_libraries(${B_NAME} PRIVATE molaccel molaccel_bench_common ${B_LIBS})
  target_include_directories(${B_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/bench)
  target_compile_definitions(${B_NAME} PRIVATE
    MOLACCEL_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    $<$<BOOL:${MOLACCEL_WITH_CUDA}>:MOLACCEL_HAVE_CUDA=1>)
endfunction()

# molaccel_add_fuzz(NAME <name> SOURCES <files...> [CORPUS <dir>])
# A libFuzzer target (clang, -fsanitize=fuzzer). CTest runs each for a few seconds on its corpus.
function(molaccel_add_fuzz)
  cmake_parse_arguments(F "" "NAME;CORPUS" "SOURCES" ${ARGN})
  if(NOT F_CORPUS)
    message(FATAL_ERROR "molaccel_add_fuzz(${F_NAME}): CORPUS <dir> is required")
  endif()
  add_executable(${F_NAME} ${F_SOURCES})
  target_link_libraries(${F_NAME} PRIVATE molaccel)
  target_include_directories(${F_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${F_NAME} PRIVATE -fsanitize=fuzzer)
  target_link_options(${F_NAME} PRIVATE -fsanitize=fuzzer)
  # CTest runs each target for 10 s, on a scratch copy of its corpus (fuzzing adds files to it).
  set(_corpus_copy ${CMAKE_CURRENT_BINARY_DIR}/${F_NAME}-corpus)
  add_test(NAME fuzz.${F_NAME}
           COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=1
                   $<TARGET_FILE:${F_NAME}> -max_total_time=10 -rss_limit_mb=2048 -timeout=10 ${_corpus_copy})
  set_tests_properties(fuzz.${F_NAME} PROPERTIES LABELS "fuzz" TIMEOUT 180 FIXTURES_REQUIRED ${F_NAME}-corpus)
  add_test(NAME fuzz.${F_NAME}.corpus
           COMMAND ${CMAKE_COMMAND} -E copy_directory ${F_CORPUS} ${_corpus_copy})
  set_tests_properties(fuzz.${F_NAME}.corpus PROPERTIES LABELS "fuzz" FIXTURES_SETUP ${F_NAME}-corpus)
endfunction()

# molaccel_add_multiversion(<target> SOURCE <file.cpp> ISAS <isa...> [COMPILE_OPTIONS <opt...>])
# Compiles one CPU source once per instruction set (sse4 avx2 avx512) into <target>, each copy
# with MOLACCEL_ISA=<isa> and MOLACCEL_ISA_NAMESPACE=isa_<isa> defined, so the source wraps its
# kernels in `namespace MOLACCEL_ISA_NAMESPACE { ... }` and a dispatcher picks one at run time
# from molaccel::cpu_info().simd (minimap2/parasail style: one source, many builds).
set(MOLACCEL_ISA_FLAGS_scalar "")
set(MOLACCEL_ISA_FLAGS_sse4 "-msse4.2;-mpopcnt")
set(MOLACCEL_ISA_FLAGS_avx2 "-mavx2;-mfma;-mbmi;-mbmi2;-mlzcnt;-mpopcnt")
set(MOLACCEL_ISA_FLAGS_avx512 "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx2;-mfma;-mbmi;-mbmi2;-mlzcnt;-mpopcnt")
function(molaccel_add_multiversion target)
  cmake_parse_arguments(M "" "SOURCE" "ISAS;COMPILE_OPTIONS" ${ARGN})
  get_filename_component(_stem ${M_SOURCE} NAME_WE)
  foreach(isa IN LISTS M_ISAS)
    set(_obj ${target}_${_stem}_${isa})
    add_library(${_obj} OBJECT ${M_SOURCE})
    target_include_directories(${_obj} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${_obj} PRIVATE fmt::fmt)
    target_compile_definitions(${_obj} PRIVATE MOLACCEL_ISA=${isa} MOLACCEL_ISA_NAMESPACE=isa_${isa})
    target_compile_options(${_obj} PRIVATE ${MOLACCEL_ISA_FLAGS_${isa}} ${M_COMPILE_OPTIONS})
    set_target_properties(${_obj} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${_obj}>)
  endforeach()
endfunction()
