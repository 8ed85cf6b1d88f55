# Enables CMake's HIP language with the clang that hipcc runs. CMake 3.25 looks for ROCm's CMake
# package at <ROCm root>/lib/cmake/hip-lang, where a ROCm install (/opt/rocm) has it; Debian's
# packages keep it under lib/<multiarch>/cmake, and their clang needs the ROCm and device-library
# paths that hipcc passes. So, when CMAKE_HIP_COMPILER is not given, this asks hipcc, and points
# CMake at a one-line package in the build tree that includes Debian's.
#
# In: TESSERA_HIPCC (the hipcc program). Out: the HIP language enabled.

if(NOT DEFINED CMAKE_HIP_COMPILER)
  # "hipcc-cmd: /usr/bin/clang++-15 ..." names the compiler hipcc runs.
  execute_process(COMMAND ${CMAKE_COMMAND} -E env HIPCC_VERBOSE=1 ${TESSERA_HIPCC} --version
    OUTPUT_VARIABLE hipcc_output ERROR_QUIET RESULT_VARIABLE hipcc_status)
  if(NOT hipcc_status EQUAL 0 OR NOT hipcc_output MATCHES "hipcc-cmd: *([^ \n]+)")
    message(FATAL_ERROR "tessera: cannot tell which clang ${TESSERA_HIPCC} runs; pass "
      "-DCMAKE_HIP_COMPILER=/path/to/clang++ or -DTESSERA_HIP=OFF")
  endif()
  set(CMAKE_HIP_COMPILER ${CMAKE_MATCH_1})
endif()

get_filename_component(hipcc_dir ${TESSERA_HIPCC} DIRECTORY)
find_program(TESSERA_HIPCONFIG hipconfig HINTS ${hipcc_dir})
execute_process(COMMAND ${TESSERA_HIPCONFIG} --rocmpath OUTPUT_VARIABLE rocm_root
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT IS_DIRECTORY "${rocm_root}")
  message(FATAL_ERROR "tessera: '${TESSERA_HIPCONFIG} --rocmpath' names no ROCm directory")
endif()

if(NOT EXISTS ${rocm_root}/lib/cmake/hip-lang/hip-lang-config.cmake)
  find_path(hip_lang_dir hip-lang-config.cmake
    PATHS ${rocm_root}/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/hip-lang NO_DEFAULT_PATH)
  find_path(amd_comgr_dir amd_comgr-config.cmake
    PATHS ${rocm_root}/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/amd_comgr NO_DEFAULT_PATH)
  find_path(rocm_device_libraries ocml.bc
    PATHS ${rocm_root}/lib/${CMAKE_LIBRARY_ARCHITECTURE}/amdgcn/bitcode
      ${rocm_root}/amdgcn/bitcode NO_DEFAULT_PATH)
  if(NOT hip_lang_dir OR NOT amd_comgr_dir OR NOT rocm_device_libraries)
    message(FATAL_ERROR "tessera: ROCm at ${rocm_root} lacks hip-lang, amd_comgr or the device "
      "libraries (Debian: apt-get install hipcc libamdhip64-dev)")
  endif()
  # The package's own dependency search cannot see multiarch paths while CMake checks the
  # compiler, so amd_comgr is named for it.
  set(shim ${CMAKE_BINARY_DIR}/rocm-root)
  file(WRITE ${shim}/lib/cmake/hip-lang/hip-lang-config.cmake
    "set(amd_comgr_DIR \"${amd_comgr_dir}\")\ninclude(\"${hip_lang_dir}/hip-lang-config.cmake\")\n")
  set(CMAKE_HIP_COMPILER_ROCM_ROOT ${shim})
  set(CMAKE_HIP_FLAGS
    "--rocm-path=${rocm_root} --hip-device-lib-path=${rocm_device_libraries} ${CMAKE_HIP_FLAGS}")
endif()

enable_language(HIP)
