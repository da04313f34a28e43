# The libraries data/'s readers use, each compiled only when found: zlib (gzip-compressed IDX
# files), libpng and libjpeg(-turbo) (decode_image). Without one, a stub in data/no_<library>/
# says what is missing; plain files need none of them. Linked PRIVATE: users of the installed
# libember need none of their headers.
option(EMBER_ZLIB "Read gzip-compressed files when zlib is found" ON)
option(EMBER_PNG "Decode PNG images when libpng is found" ON)
option(EMBER_JPEG "Decode JPEG images when libjpeg is found" ON)

find_package(ZLIB)
find_package(PNG)
find_package(JPEG)
foreach(lib ZLIB PNG JPEG)
  string(TOLOWER ${lib} dir)
  if(EMBER_${lib} AND ${lib}_FOUND)
    set(EMBER_HAS_${lib} ON)
    target_link_libraries(ember PRIVATE ${lib}::${lib})
  else()
    set(EMBER_HAS_${lib} OFF)
    set(dir no_${dir})
  endif()
  file(GLOB EMBER_${lib}_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/data/${dir}/*.cpp)
  target_sources(ember PRIVATE ${EMBER_${lib}_SOURCES})
endforeach()
message(STATUS "ember: zlib ${EMBER_HAS_ZLIB}, libpng ${EMBER_HAS_PNG}, libjpeg ${EMBER_HAS_JPEG}")
