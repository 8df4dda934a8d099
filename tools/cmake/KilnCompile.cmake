# kiln_compile_model(): compile an ONNX model into a .kiln plan as a build step.
#
#   kiln_compile_model(<target> MODEL <file.onnx> OUTPUT <file.kiln>
#                      [TARGET cpu|cuda] [SHAPES spec...] [PROFILE spec] [PRECISION p]
#                      [ACCEPT gates] [CALIB dir] [OPTIONS extra-args...])
#
# adds a custom command that runs
#   kiln compile MODEL -o OUTPUT [--target T] [--shape S]... [--profile P] [--precision P]
#                [--accept A] [--calib D] OPTIONS... --quiet
# and a custom target <target> (in ALL) that depends on OUTPUT. A relative MODEL is taken
# from the current source dir, a relative OUTPUT from the current binary dir. The target's
# property KILN_PLAN_FILE holds the absolute OUTPUT path.
#
# Why this shape: the plan is rebuilt when the model, the options or the kiln binary
# change, and never otherwise. The command depends on the model file; on the kiln binary:
# the `kiln` target inside kiln's own build (built first; a relink recompiles), the
# imported kiln::kiln_cli's file from an installed package, or ${KILN_EXECUTABLE} when set
# (it overrides both; relative: to the current source dir); and on an options stamp
# written at configure time only when its content (binary, model, output, arguments)
# changes. Make and Ninja also notice a changed command line themselves; the stamp makes
# that hold for every generator and covers the imported binary's location, which is not
# on the command line. The plan is written to OUTPUT.tmp and renamed, so a failed or
# interrupted compile never leaves a truncated plan that looks up to date, and a process
# that maps the old plan keeps a consistent file. A plan below fp32 (PRECISION bf16|int8)
# passes its accuracy gate first (ACCEPT, else the precision's default; docs/precision.md):
# a gate not met fails the build (kiln compile exits 4) and keeps the previous plan. A
# relative CALIB dir is taken from the current source dir; its files are not dependencies.
# Limits: the arguments are passed through to `kiln compile` unchecked (SPEC syntax:
# docs/cli.md); generator expressions in them are not evaluated into the stamp.
include_guard(GLOBAL)

function(kiln_compile_model target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "MODEL;OUTPUT;TARGET;PROFILE;PRECISION;ACCEPT;CALIB"
                        "SHAPES;OPTIONS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "kiln_compile_model(${target}): unknown arguments: "
                        "${ARG_UNPARSED_ARGUMENTS}")
  endif()
  foreach(kw IN LISTS ARG_KEYWORDS_MISSING_VALUES)
    if(kw MATCHES "^(MODEL|OUTPUT|TARGET|PROFILE|PRECISION|ACCEPT|CALIB)$")
      message(FATAL_ERROR "kiln_compile_model(${target}): ${kw} needs a value")
    endif()
  endforeach()
  foreach(kw MODEL OUTPUT)
    if(NOT ARG_${kw})
      message(FATAL_ERROR "kiln_compile_model(${target}): ${kw} <file> is required")
    endif()
  endforeach()
  if(DEFINED ARG_TARGET AND NOT ARG_TARGET MATCHES "^(cpu|cuda)$")
    message(FATAL_ERROR "kiln_compile_model(${target}): TARGET must be cpu or cuda, "
                        "got '${ARG_TARGET}'")
  endif()

  # The kiln binary: command to run, and what the command depends on for it.
  if(KILN_EXECUTABLE)
    get_filename_component(_exe "${KILN_EXECUTABLE}" ABSOLUTE)
    if(NOT EXISTS "${_exe}" OR IS_DIRECTORY "${_exe}")
      message(FATAL_ERROR "kiln_compile_model(${target}): KILN_EXECUTABLE '${_exe}' is not "
                          "a file")
    endif()
    set(_exe_dep "${_exe}")
    set(_exe_id "${_exe}")
  elseif(TARGET kiln::kiln_cli)
    set(_exe "$<TARGET_FILE:kiln::kiln_cli>")
    set(_exe_dep "$<TARGET_FILE:kiln::kiln_cli>")
    # The stamp records where the imported binary is, so a switch to another installed
    # kiln (an older file included) recompiles.
    get_target_property(_loc kiln::kiln_cli LOCATION)
    set(_exe_id "kiln::kiln_cli ${_loc}")
  elseif(TARGET kiln)
    get_target_property(_type kiln TYPE)
    if(NOT _type STREQUAL "EXECUTABLE")
      message(FATAL_ERROR "kiln_compile_model(${target}): target 'kiln' is not the kiln "
                          "executable; set KILN_EXECUTABLE")
    endif()
    set(_exe "$<TARGET_FILE:kiln>")
    set(_exe_dep kiln)  # target-level order + file-level dependency on the binary
    set(_exe_id "target kiln")
  else()
    message(FATAL_ERROR "kiln_compile_model(${target}): no kiln binary: call "
                        "find_package(kiln) first, or set KILN_EXECUTABLE")
  endif()

  get_filename_component(_model "${ARG_MODEL}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  get_filename_component(_out "${ARG_OUTPUT}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  get_filename_component(_out_dir "${_out}" DIRECTORY)

  set(_args)
  if(DEFINED ARG_TARGET)
    list(APPEND _args --target ${ARG_TARGET})
  endif()
  foreach(s IN LISTS ARG_SHAPES)
    list(APPEND _args --shape ${s})
  endforeach()
  if(DEFINED ARG_PROFILE)
    list(APPEND _args --profile ${ARG_PROFILE})
  endif()
  if(DEFINED ARG_PRECISION)
    list(APPEND _args --precision ${ARG_PRECISION})
  endif()
  if(DEFINED ARG_ACCEPT)
    list(APPEND _args --accept ${ARG_ACCEPT})
  endif()
  if(DEFINED ARG_CALIB)
    get_filename_component(_calib "${ARG_CALIB}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND _args --calib ${_calib})
  endif()
  list(APPEND _args ${ARG_OPTIONS})

  # Options stamp: rewritten only when its content changes, so its mtime moves only then.
  set(_stamp "${CMAKE_CURRENT_BINARY_DIR}/kiln_compile_model/${target}.options")
  string(JOIN "\n" _content "exe=${_exe_id}" "model=${_model}" "output=${_out}" ${_args})
  set(_old "")
  if(EXISTS "${_stamp}")
    file(READ "${_stamp}" _old)
  endif()
  if(NOT _old STREQUAL "${_content}\n")
    file(WRITE "${_stamp}" "${_content}\n")
  endif()

  # Short paths in the build log: relative to the top source/binary dir when inside it.
  set(_model_rel "${_model}")
  file(RELATIVE_PATH _rel "${CMAKE_SOURCE_DIR}" "${_model}")
  if(NOT _rel MATCHES "^\\.\\./")
    set(_model_rel "${_rel}")
  endif()
  set(_out_rel "${_out}")
  file(RELATIVE_PATH _rel "${CMAKE_BINARY_DIR}" "${_out}")
  if(NOT _rel MATCHES "^\\.\\./")
    set(_out_rel "${_rel}")
  endif()
  add_custom_command(
    OUTPUT "${_out}"
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${_out_dir}"
    COMMAND "${_exe}" compile "${_model}" -o "${_out}.tmp" ${_args} --quiet
    COMMAND "${CMAKE_COMMAND}" -E rename "${_out}.tmp" "${_out}"
    DEPENDS "${_model}" ${_exe_dep} "${_stamp}"
    COMMENT "kiln compile ${_model_rel} -> ${_out_rel}"
    VERBATIM)
  add_custom_target(${target} ALL DEPENDS "${_out}")
  set_target_properties(${target} PROPERTIES KILN_PLAN_FILE "${_out}")
endfunction()
