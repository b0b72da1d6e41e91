/* nofp_workload.cc — the C++ workload of the unwinding tests, built by the test with
 * -O2 -fomit-frame-pointer: main -> checkout::Cart::total -> std::sort (its template code,
 * instantiated here) -> the comparator -> checkout::Item::weight (burns CPU).
 *
 *   nofp_workload_cc SECONDS   (prints "ready", then "iterations N") */
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <vector>

static volatile sig_atomic_t done;
static volatile unsigned long sink;

namespace checkout {

struct Item {
	unsigned long id;
	__attribute__((noinline)) unsigned long weight() const
	{
		unsigned long x = id;
		for (int i = 0; i < 200; i++)
			x = x * 6364136223846793005ul + 1442695040888963407ul + (x >> 5);
		sink += x;
		return id;
	}
};

class Cart {
public:
	explicit Cart(unsigned n)
	{
		for (unsigned i = 0; i < n; i++)
			items_.push_back(Item{(i * 7919u) % n});
	}
	__attribute__((noinline)) unsigned long total(unsigned long seed)
	{
		std::vector<Item> v = items_;
		for (auto &it : v)
			it.id ^= seed & 3;
		std::sort(v.begin(), v.end(),
			  [](const Item &a, const Item &b) { return a.weight() < b.weight(); });
		sink += v.front().id;
		return v.back().id;
	}

private:
	std::vector<Item> items_;
};

} // namespace checkout

int main(int argc, char **argv)
{
	unsigned secs = argc > 1 ? (unsigned)strtoul(argv[1], nullptr, 10) : 5;
	std::signal(SIGALRM, [](int) { done = 1; });
	alarm(secs);
	std::printf("ready\n");
	std::fflush(stdout);
	checkout::Cart cart(400);
	unsigned long it = 0;
	while (!done)
		sink += cart.total(it++);
	std::printf("iterations %lu\n", it);
	return 0;
}
