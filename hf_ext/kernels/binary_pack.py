"""1-bit packed sign matrices and the matmul with a binarised weight ``diag(a) sign(W) diag(b)``.

Progressive binarisation of an LLM replaces a linear layer's weight by ``row_scale[:, None] *
S * col_scale[None, :]`` with ``S = sign(W)`` in {-1, +1}; :func:`pack_signs` stores ``S`` in
one bit per entry (eight per byte, least significant bit first, zero counting as +1), 16x
smaller than fp16. The Triton matmul reads each tile of those bits once and expands it in
registers, so the dense ``S`` is never materialised in memory; it is dispatched by the number of
rows of ``x``: a k-split GEMV-like tiling for decode (<= 16 rows), a GEMM tiling for prefill.
"""

import torch

from ._dispatch import use_triton

_BLOCK_ROWS = 32
_BLOCK_BYTES = 32
_BLOCK_COLS = 128
# (BLOCK_M, BLOCK_N, BLOCK_K) of the matmul: a GEMV-like tile for decode (<= 16 rows of x, split
# over k), a GEMM tile for prefill. BLOCK_K is a multiple of 8 (whole bytes) and every size >= 16 (tl.dot).
_DECODE_ROWS = 16
_DECODE_TILE = (16, 64, 256)
_PREFILL_TILE = (64, 128, 64)
_PROGRAMS_PER_SM = 4
_DOT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def pack_signs_reference(weight: torch.Tensor) -> torch.Tensor:
    """Reference path of :func:`pack_signs` (plain torch)."""
    rows, cols = weight.shape
    bits = torch.zeros(rows, _n_bytes(cols), 8, device=weight.device, dtype=torch.uint8)
    bits.flatten(1)[:, :cols] = weight >= 0
    place_values = 2 ** torch.arange(8, device=weight.device, dtype=torch.uint8)
    return (bits * place_values).sum(-1, dtype=torch.uint8)


def pack_signs_triton(weight: torch.Tensor) -> torch.Tensor:
    """Triton path of :func:`pack_signs` (CUDA, or CPU under ``TRITON_INTERPRET=1``)."""
    import triton

    from ._binary_pack_triton import pack_signs_kernel

    rows, cols = weight.shape
    packed = torch.empty(rows, _n_bytes(cols), device=weight.device, dtype=torch.uint8)
    if packed.numel():
        grid = (triton.cdiv(rows, _BLOCK_ROWS), triton.cdiv(packed.shape[1], _BLOCK_BYTES))
        pack_signs_kernel[grid](
            weight,
            packed,
            rows,
            cols,
            packed.shape[1],
            weight.stride(0),
            weight.stride(1),
            packed.stride(0),
            BLOCK_ROWS=_BLOCK_ROWS,
            BLOCK_BYTES=_BLOCK_BYTES,
        )
    return packed


def pack_signs(weight: torch.Tensor) -> torch.Tensor:
    """Pack ``weight >= 0`` of a 2-D ``(out, in)`` floating tensor into uint8 ``(out, ceil(in / 8))``.

    Bit ``j`` (least significant first) of byte ``k`` in row ``i`` is 1 iff ``weight[i, 8k + j] >= 0``
    (zero counts as +1, NaN as -1); the padding bits past ``in`` are 0.
    """
    if weight.dim() != 2:
        raise ValueError(f"pack_signs: `weight` must be 2-D (out, in), got shape {tuple(weight.shape)}")
    if not weight.is_floating_point():
        raise TypeError(f"pack_signs: `weight` must be a floating tensor, got {weight.dtype}")
    if use_triton(weight):
        return pack_signs_triton(weight)
    return pack_signs_reference(weight)


def unpack_signs_reference(packed: torch.Tensor, in_features: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Reference path of :func:`unpack_signs` (plain torch)."""
    shifts = torch.arange(8, device=packed.device, dtype=torch.uint8)
    bits = (packed.unsqueeze(-1) >> shifts) & 1
    return bits.flatten(1)[:, :in_features].to(dtype) * 2 - 1


def unpack_signs_triton(packed: torch.Tensor, in_features: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Triton path of :func:`unpack_signs` (CUDA, or CPU under ``TRITON_INTERPRET=1``)."""
    import triton

    from ._binary_pack_triton import unpack_signs_kernel

    rows = packed.shape[0]
    out = torch.empty(rows, in_features, device=packed.device, dtype=dtype)
    if out.numel():
        grid = (triton.cdiv(rows, _BLOCK_ROWS), triton.cdiv(in_features, _BLOCK_COLS))
        unpack_signs_kernel[grid](
            packed,
            out,
            rows,
            in_features,
            packed.stride(0),
            packed.stride(1),
            out.stride(0),
            BLOCK_ROWS=_BLOCK_ROWS,
            BLOCK_COLS=_BLOCK_COLS,
        )
    return out


def unpack_signs(packed: torch.Tensor, in_features: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Inverse of :func:`pack_signs`: the ``(out, in_features)`` tensor of +1/-1 in ``dtype``.

    Args:
        packed: uint8 ``(out, ceil(in_features / 8))`` tensor from :func:`pack_signs`.
        in_features: number of columns the packed rows hold.
        dtype: floating dtype of the result.
    """
    if in_features < 0:
        raise ValueError(f"unpack_signs: `in_features` must be >= 0, got {in_features}")
    _check_packed("unpack_signs", packed, in_features)
    if not dtype.is_floating_point:
        raise TypeError(f"unpack_signs: `dtype` must be a floating dtype, got {dtype}")
    if use_triton(packed):
        return unpack_signs_triton(packed, in_features, dtype)
    return unpack_signs_reference(packed, in_features, dtype)


def packed_binary_matmul_reference(
    x: torch.Tensor,
    packed: torch.Tensor,
    row_scale: torch.Tensor,
    col_scale: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reference path of :func:`packed_binary_matmul` (unpacks ``S`` in fp32, then torch matmul)."""
    signs = unpack_signs_reference(packed, col_scale.shape[0])
    out = ((x.float() * col_scale.float()) @ signs.T) * row_scale.float()
    if bias is not None:
        out += bias.float()
    return out.to(x.dtype)


def _sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device; 1 elsewhere (the CPU interpreter)."""
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1


def matmul_config(rows: int, out_features: int, in_features: int, device: torch.device) -> tuple[int, ...]:
    """``(BLOCK_M, BLOCK_N, BLOCK_K, k_per_split, splits)`` of the Triton matmul for ``rows`` rows of ``x``.

    Up to 16 rows (decode) the weight's bits dominate the traffic: the k dimension is split until
    there are about ``_PROGRAMS_PER_SM`` programs per SM streaming them. Above, one GEMM tile per
    program and no split.
    """
    block_m, block_n, block_k = _DECODE_TILE if rows <= _DECODE_ROWS else _PREFILL_TILE
    k_tiles = max(1, -(-in_features // block_k))
    splits = 1
    if rows <= _DECODE_ROWS:
        tiles = max(1, -(-rows // block_m) * -(-out_features // block_n))
        splits = min(k_tiles, max(1, -(-_PROGRAMS_PER_SM * _sm_count(device) // tiles)))
    k_per_split = -(-k_tiles // splits) * block_k
    return block_m, block_n, block_k, k_per_split, max(1, -(-in_features // k_per_split))


def packed_binary_matmul_triton(
    x: torch.Tensor,
    packed: torch.Tensor,
    row_scale: torch.Tensor,
    col_scale: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Triton path of :func:`packed_binary_matmul` (CUDA, or CPU under ``TRITON_INTERPRET=1``)."""
    import triton

    from ._binary_pack_triton import packed_binary_matmul_kernel

    if x.dtype not in _DOT_DTYPES:
        raise TypeError(f"packed_binary_matmul_triton: `x` must be float32, float16 or bfloat16, got {x.dtype}")
    in_features, out_features = col_scale.shape[0], row_scale.shape[0]
    flat = x.reshape(x.shape[:-1].numel(), in_features)
    rows = flat.shape[0]
    block_m, block_n, block_k, k_per_split, splits = matmul_config(rows, out_features, in_features, x.device)
    # One split writes the result; several write fp32 partial sums, added below.
    out = torch.empty(splits, rows, out_features, device=x.device, dtype=x.dtype if splits == 1 else torch.float32)
    if out.numel():
        grid = (triton.cdiv(rows, block_m), triton.cdiv(out_features, block_n), splits)
        packed_binary_matmul_kernel[grid](
            flat,
            packed,
            row_scale.contiguous(),
            col_scale.contiguous(),
            None if bias is None else bias.contiguous(),
            out,
            rows,
            out_features,
            in_features,
            k_per_split,
            flat.stride(0),
            flat.stride(1),
            packed.stride(0),
            packed.stride(1),
            out.stride(0),
            out.stride(1),
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            BLOCK_K=block_k,
        )
    out = out[0] if splits == 1 else out.sum(0).to(x.dtype)
    return out.reshape(*x.shape[:-1], out_features)


def packed_binary_matmul(
    x: torch.Tensor,
    packed: torch.Tensor,
    row_scale: torch.Tensor,
    col_scale: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """``F.linear(x, row_scale[:, None] * S * col_scale[None, :], bias)`` with ``S`` read from its 1-bit packing.

    Accumulates in fp32 and returns ``x``'s dtype.

    Args:
        x: ``(..., in)`` floating tensor.
        packed: uint8 ``(out, ceil(in / 8))`` signs ``S`` from :func:`pack_signs`.
        row_scale: ``(out,)`` floating tensor, the per-output scale ``a``.
        col_scale: ``(in,)`` floating tensor, the per-input scale ``b``; its length sets ``in``.
        bias: optional ``(out,)`` floating tensor.
    """
    if not x.is_floating_point():
        raise TypeError(f"packed_binary_matmul: `x` must be a floating tensor, got {x.dtype}")
    for name, vector in {"row_scale": row_scale, "col_scale": col_scale, "bias": bias}.items():
        if vector is None:
            continue
        if vector.dim() != 1:
            raise ValueError(f"packed_binary_matmul: `{name}` must be 1-D, got shape {tuple(vector.shape)}")
        if not vector.is_floating_point():
            raise TypeError(f"packed_binary_matmul: `{name}` must be a floating tensor, got {vector.dtype}")
    in_features, out_features = col_scale.shape[0], row_scale.shape[0]
    _check_packed("packed_binary_matmul", packed, in_features)
    if x.dim() == 0 or x.shape[-1] != in_features:
        raise ValueError(
            f"packed_binary_matmul: `x` must be (..., in) with in = col_scale.shape[0] = {in_features}, "
            f"got shape {tuple(x.shape)}"
        )
    if packed.shape[0] != out_features or (bias is not None and bias.shape[0] != out_features):
        raise ValueError(
            f"packed_binary_matmul: `packed`, `row_scale` and `bias` must have the same length (out), got "
            f"{packed.shape[0]}, {out_features} and {None if bias is None else bias.shape[0]}"
        )
    tensors = [t for t in (x, packed, row_scale, col_scale, bias) if t is not None]
    if use_triton(*tensors) and x.dtype in _DOT_DTYPES:
        return packed_binary_matmul_triton(x, packed, row_scale, col_scale, bias)
    return packed_binary_matmul_reference(x, packed, row_scale, col_scale, bias)


def _n_bytes(in_features: int) -> int:
    return (in_features + 7) // 8


def _check_packed(caller: str, packed: torch.Tensor, in_features: int) -> None:
    if packed.dtype != torch.uint8:
        raise TypeError(f"{caller}: `packed` must be uint8, got {packed.dtype}")
    if packed.dim() != 2 or packed.shape[1] != _n_bytes(in_features):
        raise ValueError(
            f"{caller}: `packed` must be 2-D (out, ceil(in_features / 8)) = (out, {_n_bytes(in_features)}), "
            f"got shape {tuple(packed.shape)}"
        )
