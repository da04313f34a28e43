# ember on NVIDIA's CUDA development image (CUDA, cuDNN and NCCL; Ubuntu 24.04): the image builds
# ember, its tests and its examples with the repository's scripts, and runs the README's main
# job on the GPUs it is given.
#   docker build -t ember .                                     # CUDA_ARCHITECTURES=90 by default
#   docker run --rm --gpus all ember                            # the main job: scripts/run_main.sh
#   docker run --rm --gpus all ember bash scripts/run_tests.sh  # every test, the GPU's included
#   docker run --rm --gpus all ember build/examples/train_bert --help
ARG CUDA_IMAGE=nvidia/cuda:13.0.1-cudnn-devel-ubuntu24.04
FROM ${CUDA_IMAGE}
# The GPUs the kernels are compiled for (CMake's CUDA_ARCHITECTURES): 90 is Hopper (H100, H200).
ARG CUDA_ARCHITECTURES=90
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /opt/ember
COPY . .
# The scripts install what they use (Debian packages, cudnn_frontend's headers from PyPI); the
# data set comes from its Debian package now, so that a run needs no network.
RUN bash scripts/build.sh -DEMBER_BUILD_TESTS=ON -DEMBER_BUILD_BENCHMARKS=ON \
        -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES} \
    && bash scripts/fetch_fashion_mnist.sh
CMD ["bash", "scripts/run_main.sh"]
