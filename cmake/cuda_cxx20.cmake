# Some CMake versions know no C++20 flag for nvcc and refuse CMAKE_CUDA_STANDARD 20; nvcc (12+)
# takes -std=c++20.
set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
