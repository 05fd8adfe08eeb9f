# Seer's fuzz target: input parsers and small predictions (replay + mutations under CTest).
astral_add_fuzz_target(seer_inputs
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz/seer_inputs_fuzz.cpp
  DEPS astral::seer
  CORPUS ${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus)
