// gpu-check fallback when PyTorch is absent: the same two-rank test against the system NCCL.
// Rank 0 writes the NCCL unique id to a file, rank 1 reads it; both use GPU 0. Runs all_reduce
// (sum, several sizes) and all-to-all (grouped ncclSend/ncclRecv, as torch's all_to_all_single
// does) and checks every element. Exit 0 when all results are right.
//   nccl_collectives RANK ID_FILE
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#define CHECK_CUDA(call)                                                                   \
  do {                                                                                     \
    cudaError_t e = (call);                                                                \
    if (e != cudaSuccess) {                                                                \
      std::fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, cudaGetErrorString(e)); \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)
#define CHECK_NCCL(call)                                                                   \
  do {                                                                                     \
    ncclResult_t r = (call);                                                               \
    if (r != ncclSuccess) {                                                                \
      std::fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, ncclGetErrorString(r)); \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: nccl_collectives RANK ID_FILE\n");
    return 2;
  }
  int rank = std::atoi(argv[1]);
  const int world = 2;
  std::string id_file = argv[2];
  ncclUniqueId id;
  if (rank == 0) {
    CHECK_NCCL(ncclGetUniqueId(&id));
    std::string tmp = id_file + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(reinterpret_cast<char*>(&id), sizeof id);
    std::rename(tmp.c_str(), id_file.c_str());
  } else {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      std::ifstream in(id_file, std::ios::binary);
      if (in.read(reinterpret_cast<char*>(&id), sizeof id)) break;
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "rank 1: no NCCL id from rank 0\n");
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  CHECK_CUDA(cudaSetDevice(0));
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, world, id, rank));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));

  // all_reduce: rank r contributes (r + 1) + i % 5; the sum is 3 + 2 * (i % 5).
  for (size_t count : {size_t(1), size_t(1000), size_t(1) << 20, size_t(64) << 20}) {
    std::vector<float> host(count);
    for (size_t i = 0; i < count; ++i) host[i] = float(rank + 1) + float(i % 5);
    float* dev = nullptr;
    CHECK_CUDA(cudaMalloc(&dev, count * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(dev, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_NCCL(ncclAllReduce(dev, dev, count, ncclFloat, ncclSum, comm, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemcpy(host.data(), dev, count * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaFree(dev));
    for (size_t i = 0; i < count; ++i) {
      if (host[i] != 3.0f + 2.0f * float(i % 5)) {
        std::fprintf(stderr, "rank %d: all_reduce of %zu floats wrong at %zu: %f\n", rank, count,
                     i, host[i]);
        return 1;
      }
    }
    std::printf("rank %d: all_reduce %zu floats ok\n", rank, count);
  }

  // all_to_all: chunk j of rank r holds 1000 * r + j; rank r receives chunk r of every peer.
  const size_t chunk = size_t(1) << 20;
  std::vector<float> send(chunk * world), recv(chunk * world);
  for (int j = 0; j < world; ++j) {
    for (size_t i = 0; i < chunk; ++i) send[j * chunk + i] = float(1000 * rank + j) + float(i % 3);
  }
  float *dsend = nullptr, *drecv = nullptr;
  CHECK_CUDA(cudaMalloc(&dsend, send.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&drecv, recv.size() * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dsend, send.data(), send.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_NCCL(ncclGroupStart());
  for (int peer = 0; peer < world; ++peer) {
    CHECK_NCCL(ncclSend(dsend + peer * chunk, chunk, ncclFloat, peer, comm, stream));
    CHECK_NCCL(ncclRecv(drecv + peer * chunk, chunk, ncclFloat, peer, comm, stream));
  }
  CHECK_NCCL(ncclGroupEnd());
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaMemcpy(recv.data(), drecv, recv.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int peer = 0; peer < world; ++peer) {
    for (size_t i = 0; i < chunk; ++i) {
      float expected = float(1000 * peer + rank) + float(i % 3);
      if (recv[peer * chunk + i] != expected) {
        std::fprintf(stderr, "rank %d: all_to_all wrong from rank %d at %zu: %f, expected %f\n",
                     rank, peer, i, recv[peer * chunk + i], expected);
        return 1;
      }
    }
  }
  std::printf("rank %d: all_to_all ok\n", rank);
  CHECK_CUDA(cudaFree(dsend));
  CHECK_CUDA(cudaFree(drecv));
  CHECK_NCCL(ncclCommDestroy(comm));
  std::printf("rank %d: PASS\n", rank);
  return 0;
}
