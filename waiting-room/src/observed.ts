/**
 * What the page models share: one view, handed in after both exist (the view reads the model, so
 * it is built second). A model calls `this.view` to say what changed; before `observe` that is a
 * wiring bug and throws.
 */
export abstract class Observed<View> {
  private observer: View | null = null;

  observe(view: View): void {
    this.observer = view;
  }

  protected get view(): View {
    if (!this.observer) throw new Error("a page model was used before its view was attached");
    return this.observer;
  }
}
