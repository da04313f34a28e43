# The libraries text/'s tokenizer uses, each compiled only when found: utf8proc (Unicode
# categories, case mapping and normalization; without it BertTokenizer's constructor throws) and
# nlohmann-json (reading tokenizer_config.json; without it that reader throws). A stub in
# text/no_<library>/ says what is missing. Linked PRIVATE, as in ember_data_formats.cmake.
option(EMBER_UTF8PROC "Tokenize text when utf8proc is found" ON)
option(EMBER_NLOHMANN_JSON "Read tokenizer_config.json when nlohmann-json is found" ON)

# Debian's libutf8proc-dev has a pkg-config file but no CMake package.
find_path(UTF8PROC_INCLUDE_DIR utf8proc.h)
find_library(UTF8PROC_LIBRARY utf8proc)
find_package(nlohmann_json 3 QUIET)

set(EMBER_HAS_UTF8PROC OFF)
set(utf8proc_dir no_utf8proc)
if(EMBER_UTF8PROC AND UTF8PROC_INCLUDE_DIR AND UTF8PROC_LIBRARY)
  set(EMBER_HAS_UTF8PROC ON)
  set(utf8proc_dir utf8proc)
  target_include_directories(ember PRIVATE ${UTF8PROC_INCLUDE_DIR})
  target_link_libraries(ember PRIVATE ${UTF8PROC_LIBRARY})
endif()
set(EMBER_HAS_NLOHMANN_JSON OFF)
set(json_dir no_nlohmann_json)
if(EMBER_NLOHMANN_JSON AND nlohmann_json_FOUND)
  set(EMBER_HAS_NLOHMANN_JSON ON)
  set(json_dir nlohmann_json)
  target_link_libraries(ember PRIVATE nlohmann_json::nlohmann_json)
endif()
file(GLOB EMBER_TEXT_LIBRARY_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/text/${utf8proc_dir}/*.cpp
  ${CMAKE_SOURCE_DIR}/text/${json_dir}/*.cpp)
target_sources(ember PRIVATE ${EMBER_TEXT_LIBRARY_SOURCES})
message(STATUS "ember: utf8proc ${EMBER_HAS_UTF8PROC}, nlohmann-json ${EMBER_HAS_NLOHMANN_JSON}")
