"""gpu-check with PyTorch: one of two ranks on GPU 0, torch.distributed over NCCL.

The launcher (tools/gpu-check) gives each rank its own NCCL_HOSTID, so NCCL treats them as two
hosts and moves every byte through the net plugin, which LD_PRELOAD alone activated.
    python3 torch_collectives.py RANK PORT
"""
import sys

import torch
import torch.distributed as dist


def main() -> int:
    rank, port = int(sys.argv[1]), int(sys.argv[2])
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    device = torch.device("cuda", 0)
    # all_reduce: rank r contributes (r + 1) + i % 5; the sum is 3 + 2 * (i % 5).
    for count in (1, 1000, 1 << 20, 64 << 20):
        pattern = torch.arange(count, device=device, dtype=torch.float32).remainder(5)
        t = pattern + float(rank + 1)
        dist.all_reduce(t)
        torch.cuda.synchronize()
        if not torch.equal(t, pattern * 2 + 3):
            print(f"rank {rank}: all_reduce of {count} floats WRONG", flush=True)
            return 1
        print(f"rank {rank}: all_reduce {count} floats ok", flush=True)
    # all_to_all: chunk j of rank r holds 1000 * r + j (+ i % 3); rank r gets chunk r of each.
    chunk = 1 << 20
    ramp = torch.arange(chunk, device=device, dtype=torch.float32).remainder(3)
    send = torch.cat([ramp + float(1000 * rank + j) for j in range(2)])
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    torch.cuda.synchronize()
    expected = torch.cat([ramp + float(1000 * peer + rank) for peer in range(2)])
    if not torch.equal(recv, expected):
        print(f"rank {rank}: all_to_all WRONG", flush=True)
        return 1
    print(f"rank {rank}: all_to_all ok", flush=True)
    dist.destroy_process_group()
    print(f"rank {rank}: PASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
