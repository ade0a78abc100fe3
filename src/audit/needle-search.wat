;; The prefilter's needle search (see needle-search.ts): the first position in memory[start, end) where any of three
;; needles begins, or -1. WebAssembly SIMD (fixed-width 128-bit, in Node since 16.4), after W. Muła's "SIMD-friendly
;; algorithms for substring searching" (http://0x80.pl/articles/simd-strfind.html, "generic SIMD"): a position is a
;; candidate when the needle's first byte is there and its last byte is at position + length - 1; 16 positions are
;; tested at once, and only candidates are compared byte by byte.
;;
;; Compiled by scripts/gen-wasm.mjs (wabt) into needle-search-wasm.ts; a test checks that the two agree.
;;
;; Memory layout (bytes), written by needle-search.ts:
;;   [0, 64)     needle A      [64, 128)  needle B      [128, 192)  needle C
;;   [192, 196)  length of A (u32 LE)      [196, 200)  length of B      [200, 204)  length of C
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

  ;; Candidate mask of the 16 positions at `i` for one needle: its first byte at i + k and its last byte at
  ;; i + k + len - 1.
  (func $pair (param $i i32) (param $v v128) (param $len i32) (param $first v128) (param $last v128) (result v128)
    (v128.and (i8x16.eq (local.get $v) (local.get $first))
              (i8x16.eq (v128.load (i32.sub (i32.add (local.get $i) (local.get $len)) (i32.const 1))) (local.get $last))))

  ;; Candidate mask of the 16 positions at `i` for any of the three needles.
  (func $candidates (param $i i32) (param $la i32) (param $lb i32) (param $lc i32)
                    (param $a0 v128) (param $al v128) (param $b0 v128) (param $bl v128) (param $c0 v128) (param $cl v128)
                    (result v128)
    (local $v v128)
    (local.set $v (v128.load (local.get $i)))
    (v128.or
      (v128.or (call $pair (local.get $i) (local.get $v) (local.get $la) (local.get $a0) (local.get $al))
               (call $pair (local.get $i) (local.get $v) (local.get $lb) (local.get $b0) (local.get $bl)))
      (call $pair (local.get $i) (local.get $v) (local.get $lc) (local.get $c0) (local.get $cl))))

  (func (export "find") (param $start i32) (param $end i32) (result i32)
    (local $la i32) (local $lb i32) (local $lc i32) (local $i i32) (local $m i32) (local $p i32)
    (local $a0 v128) (local $al v128) (local $b0 v128) (local $bl v128) (local $c0 v128) (local $cl v128)
    (local.set $la (i32.load (i32.const 192)))
    (local.set $lb (i32.load (i32.const 196)))
    (local.set $lc (i32.load (i32.const 200)))
    (local.set $a0 (i8x16.splat (i32.load8_u (i32.const 0))))
    (local.set $al (i8x16.splat (i32.load8_u (i32.sub (local.get $la) (i32.const 1)))))
    (local.set $b0 (i8x16.splat (i32.load8_u (i32.const 64))))
    (local.set $bl (i8x16.splat (i32.load8_u (i32.add (i32.const 63) (local.get $lb)))))
    (local.set $c0 (i8x16.splat (i32.load8_u (i32.const 128))))
    (local.set $cl (i8x16.splat (i32.load8_u (i32.add (i32.const 127) (local.get $lc)))))
    (local.set $i (local.get $start))
    ;; Skip 32 positions per step while none is a candidate (almost always).
    (block $skipped
      (loop $skip
        (br_if $skipped (i32.gt_u (i32.add (local.get $i) (i32.const 32)) (local.get $end)))
        (br_if $skipped (v128.any_true (v128.or
          (call $candidates (local.get $i) (local.get $la) (local.get $lb) (local.get $lc)
                            (local.get $a0) (local.get $al) (local.get $b0) (local.get $bl) (local.get $c0) (local.get $cl))
          (call $candidates (i32.add (local.get $i) (i32.const 16)) (local.get $la) (local.get $lb) (local.get $lc)
                            (local.get $a0) (local.get $al) (local.get $b0) (local.get $bl) (local.get $c0) (local.get $cl)))))
        (local.set $i (i32.add (local.get $i) (i32.const 32)))
        (br $skip)))
    ;; 16 positions per step: compare each candidate in order, so the first match found is the leftmost.
    (block $done
      (loop $blocks
        (br_if $done (i32.ge_u (local.get $i) (local.get $end)))
        (local.set $m (i8x16.bitmask
          (call $candidates (local.get $i) (local.get $la) (local.get $lb) (local.get $lc)
                            (local.get $a0) (local.get $al) (local.get $b0) (local.get $bl) (local.get $c0) (local.get $cl))))
        (block $none
          (loop $bits
            (br_if $none (i32.eqz (local.get $m)))
            (local.set $p (i32.add (local.get $i) (i32.ctz (local.get $m))))
            (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
            (if (i32.le_u (i32.add (local.get $p) (local.get $la)) (local.get $end))
              (then (if (call $equal (local.get $p) (i32.const 0) (local.get $la)) (then (return (local.get $p))))))
            (if (i32.le_u (i32.add (local.get $p) (local.get $lb)) (local.get $end))
              (then (if (call $equal (local.get $p) (i32.const 64) (local.get $lb)) (then (return (local.get $p))))))
            (if (i32.le_u (i32.add (local.get $p) (local.get $lc)) (local.get $end))
              (then (if (call $equal (local.get $p) (i32.const 128) (local.get $lc)) (then (return (local.get $p))))))
            (local.set $m (i32.and (local.get $m) (i32.sub (local.get $m) (i32.const 1))))
            (br $bits)))
        (local.set $i (i32.add (local.get $i) (i32.const 16)))
        (br $blocks)))
    (i32.const -1))
)
