"""FCM degeneracy against the codebook sizes: mean largest membership per RQ level for a
few level sizes and m, on the 4,955 HotpotQA MiniLM embeddings. Writes fcm_sizes.json."""
from __future__ import annotations


from common import load_hotpot, write_json
from fcm_degeneracy import levels, memberships

if __name__ == "__main__":
    ds = load_hotpot()
    rows = []
    for sizes in ((96, 24, 12), (48, 12, 6), (24, 6, 3), (8, 4, 2)):
        lv = levels(ds["emb"], sizes=sizes)
        for m in (2.0, 1.25, 1.1):
            U = memberships(lv, m, "none")
            row = dict(sizes=sizes, m=m, uniform=[round(1 / k, 4) for k in sizes],
                       mean_max_membership=[round(float(u.max(axis=1).mean()), 4) for u in U],
                       max_over_uniform=[round(float(u.max(axis=1).mean()) * k, 2) for u, k in zip(U, sizes)])
            rows.append(row)
            print(row, flush=True)
    write_json("fcm_sizes", dict(rows=rows))
