// The crypto every encrypted point read does, alone and from C (libsodium), for the store benchmark's breakdown:
// what is left of the store's read after the C floor and this is the cost of everything else.
#ifndef CRYPTO_BASELINES_H
#define CRYPTO_BASELINES_H

#include <stddef.h>

/// Prepares keys, a 40-byte message and a sealed 2,048-byte secret; 0 on success.
int crypto_baseline_prepare(void);

/// One keyed BLAKE2b (16-byte output) of the 40-byte message, as a blind index is computed; returns a byte of it.
int crypto_baseline_blind_index(void);

/// One XChaCha20-Poly1305 open of the sealed 2,048 bytes (with 60 bytes of additional data); 0 when it authenticates.
int crypto_baseline_open(void);

#endif
