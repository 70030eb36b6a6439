// moe_dispatch: one record per (token, choice) slot, as the fused AllToAll sends it: a 16-byte
// header (expert id, gate weight, activation scale, token) followed by the token's activation,
// so an expert kernel finds everything it needs in one contiguous read.
//
// Record of slot s = t·K + j, `record` words:
//   f32 activations (FP8 = false): [expert, gate, 1.0, token | x[t, 0..D]]            4 + D words
//   FP8 activations (FP8 = true):  [expert, gate, 1.0, token | tile scales, padded to 4 words |
//                                   E4M3 codes, 4 per word, element order]   4 + pad4(D/128) + D/4
// (include/fp8.wgsl is prepended: the FP8 tiles of engine::quant::activation.) One workgroup of 64
// per slot. Constraints: D % 16 == 0; with FP8, D ≤ 128·MAX_TILES.

override FP8: bool = false;
const MAX_TILES: u32 = 64u;

struct MoeDispatchParams {
    tokens: u32,
    k: u32,
    hidden: u32,
    record: u32,
}

@group(0) @binding(0) var<uniform> params: MoeDispatchParams;
@group(0) @binding(1) var<storage, read> h: array<vec4<f32>>;              // [T, D/4]
@group(0) @binding(2) var<storage, read> ids: array<u32>;                  // [T, K]
@group(0) @binding(3) var<storage, read> gates: array<f32>;                // [T, K]
@group(0) @binding(4) var<storage, read_write> records: array<vec4<u32>>;  // [T·K, record/4]

// Per tile, the largest |x| as bits: non-negative floats order like their bits.
var<workgroup> tile_max: array<atomic<u32>, MAX_TILES>;

@compute @workgroup_size(64)
fn moe_dispatch(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let slot = wg.x;
    if (slot >= params.tokens * params.k) {
        return;
    }
    let t = slot / params.k;
    let d4 = params.hidden / 4u;
    let base = slot * (params.record / 4u);
    if (lid == 0u) {
        records[base] = vec4<u32>(ids[slot], bitcast<u32>(gates[slot]), bitcast<u32>(1.0), t);
    }
    if (!FP8) {
        for (var i = lid; i < d4; i += 64u) {
            records[base + 1u + i] = bitcast<vec4<u32>>(h[t * d4 + i]);
        }
        return;
    }
    // FP8: each invocation owns groups of 16 elements (4 vec4s of h → one vec4 of codes).
    let tiles = (params.hidden + FP8_TILE - 1u) / FP8_TILE;
    let scale_x4 = (tiles + 3u) / 4u;
    for (var i = lid; i < MAX_TILES; i += 64u) {
        atomicStore(&tile_max[i], 0u);
    }
    workgroupBarrier();
    let groups = params.hidden / 16u;
    for (var g = lid; g < groups; g += 64u) {
        var m = vec4(0.0);
        for (var j = 0u; j < 4u; j++) {
            m = max(m, abs(h[t * d4 + 4u * g + j]));
        }
        atomicMax(&tile_max[(16u * g) / FP8_TILE], bitcast<u32>(max(max(m.x, m.y), max(m.z, m.w))));
    }
    workgroupBarrier();
    for (var i = lid; i < scale_x4; i += 64u) {
        var s = vec4<u32>(0u);
        for (var j = 0u; j < 4u; j++) {
            if (4u * i + j < tiles) {
                s[j] = bitcast<u32>(pow2(fp8_tile_exponent(atomicLoad(&tile_max[4u * i + j]))));
            }
        }
        records[base + 1u + i] = s;
    }
    for (var g = lid; g < groups; g += 64u) {
        // Multiplying by 2^-e is exact: the same value as the CPU's division by 2^e. (A finite
        // amax keeps e ≤ 120, so 2^-e is a normal f32.)
        let inv = pow2(-fp8_tile_exponent(atomicLoad(&tile_max[(16u * g) / FP8_TILE])));
        var words = vec4<u32>(0u);
        for (var j = 0u; j < 4u; j++) {
            words[j] = e4m3_encode_word(h[t * d4 + 4u * g + j] * inv);
        }
        records[base + 1u + scale_x4 + g] = words;
    }
}
