#include <cstdio>
int main() { std::puts("kiln: CLI under construction"); return 0; }
