/* Prints the CPU's brand string, vendor and family/model/stepping from cpuid (lscpu says "unknown" under gVisor). */
#include <cpuid.h>
#include <stdio.h>
#include <string.h>
int main(void) {
  unsigned r[12], a, b, c, d; char vendor[13] = {0};
  __get_cpuid(0, &a, &b, &c, &d); memcpy(vendor, &b, 4); memcpy(vendor + 4, &d, 4); memcpy(vendor + 8, &c, 4);
  __get_cpuid(1, &a, &b, &c, &d);
  unsigned fam = (a >> 8) & 0xf, model = (a >> 4) & 0xf, step = a & 0xf;
  if (fam == 0xf) fam += (a >> 20) & 0xff;
  if (fam >= 6) model |= ((a >> 16) & 0xf) << 4;
  for (unsigned i = 0; i < 3; i++) __get_cpuid(0x80000002 + i, &r[4*i], &r[4*i+1], &r[4*i+2], &r[4*i+3]);
  char brand[49] = {0}; memcpy(brand, r, 48);
  unsigned eb = 0, ec = 0, ed = 0; __get_cpuid_count(7, 0, &a, &eb, &ec, &ed);
  printf("brand: %s\nvendor: %s family %u model %u stepping %u\navx512f: %u avx512_bf16/vnni...: see flags\n", brand, vendor, fam, model, step, (eb >> 16) & 1);
  return 0;
}
