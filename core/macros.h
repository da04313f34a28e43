#pragma once

// Lets the same small functions (dtype conversions, functors, Philox) compile for host and device.
#if defined(__CUDACC__)
#define EMBER_HOST_DEVICE __host__ __device__
#else
#define EMBER_HOST_DEVICE
#endif
