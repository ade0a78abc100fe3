;; The prefilter's needle search (see needle-search.ts): the first position in memory[start, end) where any of three
;; needles begins, or -1. WebAssembly SIMD (fixed-width 128-bit, in Node since 16.4), after W. Muła's "SIMD-friendly
;; algorithms for substring searching" (http://0x80.pl/articles/simd-strfind.html, "generic SIMD"): a position is a
;; candidate for a needle when two of its bytes, its anchors, are where they would be if the needle began there; 16
;; positions are tested at once, and only candidates are compared byte by byte. Muła takes the first and the last
;; byte; here each needle names its own two (needle-search.ts), so that bytes every audit event holds in the same
;; places (the `authorization.k8s.io/` keys start and end like `authentication.k8s.io/`) do not make candidates.
;;
;; Compiled by scripts/gen-wasm.mjs (wabt) into needle-search-wasm.ts; a test checks that the two agree.
;;
;; Memory layout (bytes), written by needle-search.ts:
;;   [0, 64)     needle A      [64, 128)  needle B      [128, 192)  needle C
;;   [192, 196)  length of A (u32 LE)      [196, 200)  length of B      [200, 204)  length of C
;;   [208, 232)  anchor offsets (u32 LE): A's first and second at 208 and 212, B's at 216 and 220, C's at 224 and 228;
;;               each < the needle's length
;;   [1024, …)   haystacks, each followed by at least 128 bytes of padding (loads may read up to end + 80)
;; Needles are 1–64 bytes long (a caller with fewer needles repeats one). Matches must lie wholly inside [start, end): bytes past `end` are never matched.
(module
  (memory (export "memory") 1)

  ;; 1 when the `len` bytes at `p` equal those at `n`, else 0.
  (func $equal (param $p i32) (param $n i32) (param $len i32) (result i32)
    (local $k i32)
    (loop $next
      (if (i32.ge_u (local.get $k) (local.get $len)) (then (return (i32.const 1))))
      (if (i32.ne (i32.load8_u (i32.add (local.get $p) (local.get $k)))
                  (i32.load8_u (i32.add (local.get $n) (local.get $k))))
        (then (return (i32.const 0))))
      (local.set $k (i32.add (local.get $k) (i32.const 1)))
      (br $next))
    (unreachable))

  ;; Candidate mask of the 16 positions at `i` for one needle: its byte `x` at i + k + ox and its byte `y` at i + k + oy.
  (func $pair (param $i i32) (param $ox i32) (param $x v128) (param $oy i32) (param $y v128) (result v128)
    (v128.and (i8x16.eq (v128.load (i32.add (local.get $i) (local.get $ox))) (local.get $x))
              (i8x16.eq (v128.load (i32.add (local.get $i) (local.get $oy))) (local.get $y))))

  ;; Candidate mask of the 16 positions at `i` for any of the three needles (anchor offsets o, anchor bytes splatted v).
  (func $candidates (param $i i32)
                    (param $oa1 i32) (param $va1 v128) (param $oa2 i32) (param $va2 v128)
                    (param $ob1 i32) (param $vb1 v128) (param $ob2 i32) (param $vb2 v128)
                    (param $oc1 i32) (param $vc1 v128) (param $oc2 i32) (param $vc2 v128)
                    (result v128)
    (v128.or
      (v128.or (call $pair (local.get $i) (local.get $oa1) (local.get $va1) (local.get $oa2) (local.get $va2))
               (call $pair (local.get $i) (local.get $ob1) (local.get $vb1) (local.get $ob2) (local.get $vb2)))
      (call $pair (local.get $i) (local.get $oc1) (local.get $vc1) (local.get $oc2) (local.get $vc2))))

  (func (export "find") (param $start i32) (param $end i32) (result i32)
    (local $la i32) (local $lb i32) (local $lc i32) (local $i i32) (local $m i32) (local $p i32)
    (local $oa1 i32) (local $oa2 i32) (local $ob1 i32) (local $ob2 i32) (local $oc1 i32) (local $oc2 i32)
    (local $va1 v128) (local $va2 v128) (local $vb1 v128) (local $vb2 v128) (local $vc1 v128) (local $vc2 v128)
    (local.set $la (i32.load (i32.const 192)))
    (local.set $lb (i32.load (i32.const 196)))
    (local.set $lc (i32.load (i32.const 200)))
    (local.set $oa1 (i32.load (i32.const 208)))
    (local.set $oa2 (i32.load (i32.const 212)))
    (local.set $ob1 (i32.load (i32.const 216)))
    (local.set $ob2 (i32.load (i32.const 220)))
    (local.set $oc1 (i32.load (i32.const 224)))
    (local.set $oc2 (i32.load (i32.const 228)))
    (local.set $va1 (i8x16.splat (i32.load8_u (local.get $oa1))))
    (local.set $va2 (i8x16.splat (i32.load8_u (local.get $oa2))))
    (local.set $vb1 (i8x16.splat (i32.load8_u (i32.add (i32.const 64) (local.get $ob1)))))
    (local.set $vb2 (i8x16.splat (i32.load8_u (i32.add (i32.const 64) (local.get $ob2)))))
    (local.set $vc1 (i8x16.splat (i32.load8_u (i32.add (i32.const 128) (local.get $oc1)))))
    (local.set $vc2 (i8x16.splat (i32.load8_u (i32.add (i32.const 128) (local.get $oc2)))))
    (local.set $i (local.get $start))
    (loop $scan
      ;; Skip 32 positions per step while none is a candidate (almost always).
      (block $skipped
        (loop $skip
          (br_if $skipped (i32.gt_u (i32.add (local.get $i) (i32.const 32)) (local.get $end)))
          (br_if $skipped (v128.any_true (v128.or
            (call $candidates (local.get $i)
                              (local.get $oa1) (local.get $va1) (local.get $oa2) (local.get $va2)
                              (local.get $ob1) (local.get $vb1) (local.get $ob2) (local.get $vb2)
                              (local.get $oc1) (local.get $vc1) (local.get $oc2) (local.get $vc2))
            (call $candidates (i32.add (local.get $i) (i32.const 16))
                              (local.get $oa1) (local.get $va1) (local.get $oa2) (local.get $va2)
                              (local.get $ob1) (local.get $vb1) (local.get $ob2) (local.get $vb2)
                              (local.get $oc1) (local.get $vc1) (local.get $oc2) (local.get $vc2)))))
          (local.set $i (i32.add (local.get $i) (i32.const 32)))
          (br $skip)))
      (if (i32.ge_u (local.get $i) (local.get $end)) (then (return (i32.const -1))))
      ;; The 16 positions at i: compare each candidate in order, so the first match found is the leftmost.
      (local.set $m (i8x16.bitmask
        (call $candidates (local.get $i)
                          (local.get $oa1) (local.get $va1) (local.get $oa2) (local.get $va2)
                          (local.get $ob1) (local.get $vb1) (local.get $ob2) (local.get $vb2)
                          (local.get $oc1) (local.get $vc1) (local.get $oc2) (local.get $vc2))))
      (block $none
        (loop $bits
          (br_if $none (i32.eqz (local.get $m)))
          (local.set $p (i32.add (local.get $i) (i32.ctz (local.get $m))))
          (if (i32.ge_u (local.get $p) (local.get $end)) (then (return (i32.const -1))))
          (if (i32.le_u (i32.add (local.get $p) (local.get $la)) (local.get $end))
            (then (if (call $equal (local.get $p) (i32.const 0) (local.get $la)) (then (return (local.get $p))))))
          (if (i32.le_u (i32.add (local.get $p) (local.get $lb)) (local.get $end))
            (then (if (call $equal (local.get $p) (i32.const 64) (local.get $lb)) (then (return (local.get $p))))))
          (if (i32.le_u (i32.add (local.get $p) (local.get $lc)) (local.get $end))
            (then (if (call $equal (local.get $p) (i32.const 128) (local.get $lc)) (then (return (local.get $p))))))
          (local.set $m (i32.and (local.get $m) (i32.sub (local.get $m) (i32.const 1))))
          (br $bits)))
      ;; No match among them: on with the next 16 positions, back in the skip loop.
      (local.set $i (i32.add (local.get $i) (i32.const 16)))
      (br $scan))
    (unreachable))
)
