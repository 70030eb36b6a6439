// fp8_round_trip: y[t] = what an FP8 dispatch record of x[t] carries, decoded — the eager MoE's
// stand-in for FP8 records (the eager path gathers f32 rows), so both paths feed the experts the
// same values. E4M3 codes with a power-of-two scale per 1×128 tile (include/fp8.wgsl, prepended;
// engine::quant::activation). One workgroup of 64 per row. Constraints: D % 16 == 0,
// D ≤ 128·MAX_TILES.

const MAX_TILES: u32 = 64u;

struct Fp8RoundTripParams {
    rows: u32,
    width: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Fp8RoundTripParams;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;         // [rows, D/4]
@group(0) @binding(2) var<storage, read_write> y: array<vec4<f32>>;   // [rows, D/4]

var<workgroup> tile_max: array<atomic<u32>, MAX_TILES>;

@compute @workgroup_size(64)
fn fp8_round_trip(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let row = wg.x;
    if (row >= params.rows) {
        return;
    }
    let d4 = params.width / 4u;
    let base = row * d4;
    for (var i = lid; i < MAX_TILES; i += 64u) {
        atomicStore(&tile_max[i], 0u);
    }
    workgroupBarrier();
    for (var i = lid; i < d4; i += 64u) {
        let m = abs(x[base + i]);
        atomicMax(&tile_max[(4u * i) / FP8_TILE], bitcast<u32>(max(max(m.x, m.y), max(m.z, m.w))));
    }
    workgroupBarrier();
    for (var i = lid; i < d4; i += 64u) {
        let e = fp8_tile_exponent(atomicLoad(&tile_max[(4u * i) / FP8_TILE]));
        let word = e4m3_encode_word(x[base + i] * pow2(-e));
        y[base + i] = e4m3_word(word) * (256.0 * pow2(e));
    }
}
