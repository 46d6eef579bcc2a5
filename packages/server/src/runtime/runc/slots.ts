import { type Subnet, slotCount } from "../network/addresses.js";

/** Address slots of running units; the lowest free one is taken. */
export class SlotAllocator {
  private readonly byUnit = new Map<string, number>();
  private readonly used = new Set<number>();

  constructor(private readonly subnet: Subnet) {}

  take(unitId: string): number {
    const have = this.byUnit.get(unitId);
    if (have !== undefined) return have;
    const max = slotCount(this.subnet);
    for (let s = 0; s < max; s++) {
      if (!this.used.has(s)) {
        this.claim(unitId, s);
        return s;
      }
    }
    throw new Error(`no free address in the unit subnet (${max} units run already)`);
  }

  claim(unitId: string, slot: number): void {
    this.byUnit.set(unitId, slot);
    this.used.add(slot);
  }

  slotOf(unitId: string): number | undefined {
    return this.byUnit.get(unitId);
  }

  release(unitId: string): void {
    const s = this.byUnit.get(unitId);
    if (s === undefined) return;
    this.byUnit.delete(unitId);
    this.used.delete(s);
  }
}
