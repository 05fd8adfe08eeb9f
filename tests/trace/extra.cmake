# Extras for the trace suite: JSON parsing in tests, the SIGKILL child, the reader fuzz target.
if(TARGET test_trace)
  target_link_libraries(test_trace PRIVATE nlohmann_json::nlohmann_json)
endif()
